"""Django admin: per-user overrides (editable, same syntax as the API) and the read-only ledgers."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from collab.actor import admin_actor
from collab.identity import unknown_user_ids
from collab.sizes import format_bytes
from quotas import services
from quotas.models import SandboxActivity, UserResourceOverride, WorkspaceDiskUsage
from quotas.sizes import format_size, size_string
from quotas.values import DIMENSIONS, UNLIMITED_WORD, OverrideValues, parse_override_value

_HELP = {
    "count": "Live sandboxes at once. Empty or 0: the site default; 'max': unlimited.",
    "cpu": "Cores over live sandboxes of apps that declare a cost. Empty or 0: the site default; 'max': unlimited.",
    "memory": "Size such as 512M or 4G, summed like cpu. Empty: the site default; 'max' or 0: unlimited.",
    "disk": "Size such as 10G over all the person's workspaces. Empty: the site default; 'max' or 0: unlimited.",
}


class UserResourceOverrideForm(forms.ModelForm):
    """Text fields parsed exactly as the PUT endpoint parses them, so both paths mean the same."""

    count = forms.CharField(required=False, help_text=_HELP["count"])
    cpu = forms.CharField(required=False, help_text=_HELP["cpu"])
    memory = forms.CharField(required=False, help_text=_HELP["memory"])
    disk = forms.CharField(required=False, help_text=_HELP["disk"])

    class Meta:
        model = UserResourceOverride
        fields = ("user_id", "count", "cpu", "memory", "disk")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            written = OverrideValues.of(self.instance).as_written()
            for name in DIMENSIONS:
                value = written[name]
                if name in ("memory", "disk") and value not in (None, UNLIMITED_WORD):
                    value = size_string(value)
                self.initial[name] = "" if value is None else str(value)

    def clean_user_id(self) -> str:
        user_id = self.cleaned_data["user_id"].strip()
        if unknown_user_ids([user_id]):
            raise forms.ValidationError(f"{user_id!r} is not in the user directory.")
        return user_id

    def _clean_dimension(self, name: str) -> int | float | None:
        try:
            return parse_override_value(name, self.cleaned_data.get(name))
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean_count(self) -> int | float | None:
        return self._clean_dimension("count")

    def clean_cpu(self) -> int | float | None:
        return self._clean_dimension("cpu")

    def clean_memory(self) -> int | float | None:
        return self._clean_dimension("memory")

    def clean_disk(self) -> int | float | None:
        return self._clean_dimension("disk")


@admin.register(UserResourceOverride)
class UserResourceOverrideAdmin(admin.ModelAdmin):
    form = UserResourceOverrideForm
    list_display = ("user_id", "shown_count", "shown_cpu", "shown_memory", "shown_disk", "updated_by", "updated_at")
    search_fields = ("user_id",)
    ordering = ("user_id",)
    readonly_fields = ("created_by", "created_at", "updated_by", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: UserResourceOverride | None = None) -> tuple[str, ...]:
        # The user id is the record's key; changing it would move one person's limits to another.
        return (*self.readonly_fields, "user_id") if obj is not None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: UserResourceOverride, form: forms.Form, change: bool) -> None:
        values = OverrideValues(**{name: form.cleaned_data.get(name) for name in DIMENSIONS})
        saved = services.override_set(user_id=obj.user_id, values=values, actor=admin_actor(request))
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: UserResourceOverride) -> None:
        services.override_delete(user_id=obj.user_id, actor=admin_actor(request))

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for user_id in list(queryset.values_list("user_id", flat=True)):
            services.override_delete(user_id=user_id, actor=admin_actor(request))

    @staticmethod
    def _shown(value: int | float | None, *, size: bool) -> str:
        if value is None:
            return "(site default)"
        if value == 0:
            return "unlimited"
        return format_size(int(value)) if size else f"{value:g}"

    @admin.display(description="count")
    def shown_count(self, obj: UserResourceOverride) -> str:
        return self._shown(obj.count, size=False)

    @admin.display(description="cpu")
    def shown_cpu(self, obj: UserResourceOverride) -> str:
        return self._shown(obj.cpu, size=False)

    @admin.display(description="memory")
    def shown_memory(self, obj: UserResourceOverride) -> str:
        return self._shown(obj.memory, size=True)

    @admin.display(description="disk")
    def shown_disk(self, obj: UserResourceOverride) -> str:
        return self._shown(obj.disk, size=True)


class ReadOnlyLedgerAdmin(admin.ModelAdmin):
    """Ledgers are evidence written by the service; editing them by hand would falsify quotas."""

    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(SandboxActivity)
class SandboxActivityAdmin(ReadOnlyLedgerAdmin):
    list_display = (
        "id", "item_id", "app_slug", "owner", "backend", "backend_sandbox_id", "cpu_cores", "memory",
        "charges_cost", "last_seen_at", "lease_expires_at", "is_deleted", "close_reason",
    )  # fmt: skip
    list_filter = ("is_deleted", "backend", "close_reason", "charges_cost")
    search_fields = ("owner", "item_id", "backend_sandbox_id")
    ordering = ("-id",)
    # The detail page shows the size as every page does ("512 MB"), not the byte count.
    exclude = ("memory_bytes",)
    readonly_fields = ("memory",)

    @admin.display(description="memory", ordering="memory_bytes")
    def memory(self, obj: SandboxActivity) -> str:
        return format_size(obj.memory_bytes)


@admin.register(WorkspaceDiskUsage)
class WorkspaceDiskUsageAdmin(ReadOnlyLedgerAdmin):
    list_display = ("item_id", "app_slug", "owner", "size", "measured_at", "is_deleted")
    list_filter = ("is_deleted",)
    search_fields = ("owner", "item_id")
    ordering = ("owner", "item_id")
    exclude = ("bytes",)
    readonly_fields = ("size",)

    @admin.display(description="size", ordering="bytes")
    def size(self, obj: WorkspaceDiskUsage) -> str:
        return format_bytes(obj.bytes)

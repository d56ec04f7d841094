"""Django admin for items (the ledgers and per-user overrides are in `quotas.admin`); edits and
deletes go through the item services, so admin keeps the rules the API keeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from collab.actor import admin_actor
from collab.edge import admin_refused, form_error
from collab.errors import DomainError
from quotas import ledger
from quotas.admin import ReadOnlyLedgerAdmin
from quotas.sizes import format_size
from quotas.values import host_name
from workspace.items import pool, services
from workspace.items.models import HandoverEvent, Item, SandboxHost
from workspace.sandboxes.base import HostCapacity


class ItemForm(forms.ModelForm):
    class Meta:
        model = Item
        fields = ("title", "owner")

    def clean_title(self) -> str:
        return _validated(services.checked_title, self.cleaned_data["title"])

    def clean_owner(self) -> str:
        owner = self.cleaned_data["owner"].strip()
        return _validated(services.checked_payer, owner) if owner else owner


def _validated(check: Callable[[str], str], value: str) -> str:
    try:
        return check(value)
    except DomainError as exc:
        raise form_error(exc) from exc


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    form = ItemForm
    list_display = ("id", "app_slug", "title", "owner", "pending_owner", "created_by", "created_at")
    list_filter = ("app_slug",)
    search_fields = ("title", "owner", "created_by")
    ordering = ("-id",)
    fields = (
        "app_slug", "title", "owner", "pending_owner", "owner_named_by", "owner_named_at", "owner_assigned",
        "created_by", "created_at", "updated_by", "updated_at",
    )  # fmt: skip
    # How the payer came to pay is the services' record: staff assigning here writes it too.
    readonly_fields = (
        "app_slug", "pending_owner", "owner_named_by", "owner_named_at", "owner_assigned",
        "created_at", "updated_at", "created_by", "updated_by",
    )  # fmt: skip
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        # An item is made in its app (with its workspace); admin looks after existing ones.
        return False

    def save_model(self, request: HttpRequest, obj: Item, form: ItemForm, change: bool) -> None:
        # Staff assign the bill directly (no handover), as through the API.
        stored = Item.objects.select_for_update().get(pk=obj.pk)
        services.item_update(
            item=stored,
            actor=admin_actor(request),
            title=form.cleaned_data["title"],
            payer=form.cleaned_data["owner"],
        )

    def delete_model(self, request: HttpRequest, obj: Item) -> None:
        services.items_delete(item_ids=[obj.pk])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Item]) -> None:
        services.items_delete(item_ids=list(queryset.values_list("pk", flat=True)))

    def delete_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> HttpResponse:
        return self._refusals_shown(request, super().delete_view, object_id, extra_context)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        return self._refusals_shown(request, super().changelist_view, extra_context)

    def _refusals_shown(self, request: HttpRequest, view: Callable[..., HttpResponse], *args: Any) -> HttpResponse:
        """A refused delete (a sandbox the backend cannot close) is a message on the same page."""
        try:
            return view(request, *args)
        except DomainError as exc:
            admin_refused(self, request, exc)
            return HttpResponseRedirect(request.get_full_path())


@admin.register(HandoverEvent)
class HandoverEventAdmin(ReadOnlyLedgerAdmin):
    """What became of each handover of a bill, as the people it concerns were told (read-only:
    the record of who accepted, declined or handed back)."""

    list_display = ("at", "item", "outcome", "by", "told")
    list_filter = ("outcome",)
    search_fields = ("by", "told", "item__title")
    ordering = ("-at", "-pk")
    list_select_related = ("item",)


@admin.register(SandboxHost)
class SandboxHostAdmin(admin.ModelAdmin):
    """The pool's sandbox hosts (DESIGN.md §5 "Many sandbox machines"): what each last reported, what
    the ledger counts there, and the drain. The config names the hosts, so none is added or deleted
    here; the actions go through the item services."""

    list_display = ("url", "state", "capacity", "live_sandboxes", "draining", "drained_by", "seen_at", "problem")
    fields = ("url", "state", "capacity", "live_sandboxes", "draining", "drained_by", "drained_at", "seen_at",
              "checked_at", "answered", "problem", "report")  # fmt: skip
    readonly_fields = fields
    ordering = ("url",)
    actions = ("drain", "put_back", "close_sandboxes")

    def get_queryset(self, request: HttpRequest) -> QuerySet[SandboxHost]:
        live = (
            ledger.live_rows()
            .filter(backend="http", host=OuterRef("url"))
            .values("host")
            .annotate(count=Count("id"))
            .values("count")
        )
        return super().get_queryset(request).annotate(live=Subquery(live, output_field=IntegerField()))

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        # Every configured host has its row, with a report at most a refresh old.
        pool.hosts_refresh()
        return super().changelist_view(request, extra_context)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: SandboxHost | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: SandboxHost | None = None) -> bool:
        # Read-only fields; the actions are the changes.
        return request.user.is_staff

    @admin.display(description="state")
    def state(self, host: SandboxHost) -> str:
        if host.draining:
            return "draining"
        if not host.answered:
            return "does not answer"
        return "misconfigured" if host.problem else "answers"

    @admin.display(description="capacity")
    def capacity(self, host: SandboxHost) -> str:
        capacity = host.report.get("capacity") if isinstance(host.report, dict) else None
        if not isinstance(capacity, dict):
            return "not reported"
        state = HostCapacity.from_report(capacity)
        if state is None:
            return "not reported"
        count = "" if state.sandboxes is None else f", {state.sandboxes} sandboxes"
        return f"{state.cpu_cores:g} cores, {format_size(state.memory_bytes)}{count}"

    @admin.display(description="live sandboxes")
    def live_sandboxes(self, host: SandboxHost) -> int:
        return getattr(host, "live", None) or 0

    @admin.action(description="Drain: no new sandboxes go to the selected hosts")
    def drain(self, request: HttpRequest, queryset: QuerySet[SandboxHost]) -> None:
        self._each(request, queryset, lambda url: services.sandbox_host_drain(
            url=url, draining=True, actor=admin_actor(request)), "drained")  # fmt: skip

    @admin.action(description="Put back: the selected hosts take new sandboxes again")
    def put_back(self, request: HttpRequest, queryset: QuerySet[SandboxHost]) -> None:
        self._each(request, queryset, lambda url: services.sandbox_host_drain(
            url=url, draining=False, actor=admin_actor(request)), "put back")  # fmt: skip

    @admin.action(description="Close every sandbox on the selected hosts")
    def close_sandboxes(self, request: HttpRequest, queryset: QuerySet[SandboxHost]) -> None:
        closed = 0
        for url in queryset.values_list("url", flat=True):
            try:
                closed += services.sandbox_host_sandboxes_close(url=url, actor=admin_actor(request))
            except DomainError as exc:
                admin_refused(self, request, exc)
                return
        self.message_user(request, f"Closed {closed} sandboxes.", messages.SUCCESS)

    def _each(
        self, request: HttpRequest, queryset: QuerySet[SandboxHost], change: Callable[[str], bool], done: str
    ) -> None:
        changed = []
        for url in queryset.values_list("url", flat=True):
            try:
                if change(url):
                    changed.append(host_name(url))
            except DomainError as exc:
                admin_refused(self, request, exc)
                return
        self.message_user(request, f"{done.capitalize()}: {', '.join(changed) or 'none changed'}.", messages.SUCCESS)

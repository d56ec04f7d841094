"""Django admin for accounts, notifications and personal API tokens."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from collab import tokens
from collab.actor import admin_actor
from collab.models import ApiToken, Notification
from collab.services import notifications_mark_selected_read


class AccountAdmin(UserAdmin):
    """Django's user admin, made to pass axe-core: sign-in and join times are shown, not edited
    (their split date and time inputs carry no label), and groups and permissions are plain
    multiple selects (the two-pane picker marks up its help icon with an attribute axe refuses)."""

    filter_horizontal = ()
    readonly_fields = ("last_login", "date_joined")


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), AccountAdmin)


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("id", "recipient", "kind", "title", "actor", "read", "created_at")
    list_filter = ("kind", "read")
    search_fields = ("recipient", "title")
    ordering = ("-created_at", "-id")
    readonly_fields = ("created_at", "updated_at", "created_by", "updated_by")
    actions = ["mark_read"]
    show_full_result_count = False

    def save_model(self, request: HttpRequest, obj: Notification, form: Any, change: bool) -> None:
        # The inbox's ETag follows `updated_at`: an edit left unstamped would answer polls with 304.
        obj.stamp_updated(request.user.get_username())
        super().save_model(request, obj, form, change)

    @admin.action(description="Mark selected notifications read")
    def mark_read(self, request: HttpRequest, queryset: QuerySet[Notification]) -> None:
        marked = notifications_mark_selected_read(
            notification_ids=list(queryset.values_list("pk", flat=True)), user_id=request.user.get_username()
        )
        self.message_user(request, f"Marked {marked} notification(s) read.", messages.SUCCESS)


class ApiTokenAddForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["name"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Staff see every token (never the token itself), revoke any, and create their own; a new
    token is shown once, on the answer to the add form."""

    list_display = ("prefix", "name", "created_by", "created_at", "last_used_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("created_by", "name", "prefix")
    ordering = ("-id",)
    readonly_fields = ("prefix", "created_by", "created_at", "last_used_at", "revoked_at")
    fields = ("name", "prefix", "created_by", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]

    def get_form(self, request: HttpRequest, obj: ApiToken | None = None, **kwargs: Any) -> type[forms.ModelForm]:
        if obj is None:
            kwargs["form"] = ApiTokenAddForm
            kwargs["fields"] = ["name"]
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        return ["name"] if obj is None else list(self.fields)

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> tuple[str, ...]:
        return () if obj is None else ("name", *self.readonly_fields)

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            return
        issued = tokens.token_create(actor=admin_actor(request), name=form.cleaned_data["name"])
        obj.pk = issued.row.pk
        request._issued_token = issued  # type: ignore[attr-defined]

    def response_add(self, request: HttpRequest, obj: ApiToken, post_url_continue: str | None = None) -> HttpResponse:
        issued = getattr(request, "_issued_token", None)
        if issued is None:
            return super().response_add(request, obj, post_url_continue)
        context = {**self.admin_site.each_context(request), "issued": issued, "title": "New API token"}
        response = TemplateResponse(request, "admin/collab/token_issued.html", context)
        response["Cache-Control"] = "no-store"
        return response

    def has_delete_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False  # revoke instead: the row stays as the record of the token

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = tokens.tokens_revoke_as_staff(
            token_ids=list(queryset.values_list("pk", flat=True)), actor=admin_actor(request)
        )
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)

"""Django admin for notifications."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from collab.models import Notification
from collab.services import notifications_mark_selected_read


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("id", "recipient", "kind", "title", "actor", "read", "created_at")
    list_filter = ("kind", "read")
    search_fields = ("recipient", "title")
    ordering = ("-created_at", "-id")
    readonly_fields = ("created_at", "updated_at", "created_by", "updated_by")
    actions = ["mark_read"]
    show_full_result_count = False

    @admin.action(description="Mark selected notifications read")
    def mark_read(self, request: HttpRequest, queryset: QuerySet[Notification]) -> None:
        marked = notifications_mark_selected_read(
            notification_ids=list(queryset.values_list("pk", flat=True)), user_id=request.user.get_username()
        )
        self.message_user(request, f"Marked {marked} notification(s) read.", messages.SUCCESS)

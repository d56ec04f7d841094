"""Django admin for items and the (read-only) sandbox and disk ledgers."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from quotas.models import SandboxActivity, WorkspaceDiskUsage
from workspace.models import Item


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ("id", "app_slug", "title", "owner", "created_by", "created_at")
    list_filter = ("app_slug",)
    search_fields = ("title", "owner", "created_by")
    ordering = ("-id",)
    readonly_fields = ("created_at", "updated_at", "created_by", "updated_by")
    show_full_result_count = False


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
        "id", "item_id", "app_slug", "owner", "backend", "backend_sandbox_id", "cpu_cores", "memory_bytes",
        "last_seen_at", "lease_expires_at", "is_deleted", "close_reason",
    )  # fmt: skip
    list_filter = ("is_deleted", "backend", "close_reason")
    search_fields = ("owner", "item_id", "backend_sandbox_id")
    ordering = ("-id",)


@admin.register(WorkspaceDiskUsage)
class WorkspaceDiskUsageAdmin(ReadOnlyLedgerAdmin):
    list_display = ("item_id", "app_slug", "owner", "bytes", "measured_at", "is_deleted")
    list_filter = ("is_deleted",)
    search_fields = ("owner", "item_id")
    ordering = ("owner", "item_id")

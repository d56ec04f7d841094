"""Django admin for items (the ledgers and per-user overrides are in `quotas.admin`)."""

from __future__ import annotations

from django.contrib import admin

from workspace.items.models import Item


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ("id", "app_slug", "title", "owner", "created_by", "created_at")
    list_filter = ("app_slug",)
    search_fields = ("title", "owner", "created_by")
    ordering = ("-id",)
    readonly_fields = ("created_at", "updated_at", "created_by", "updated_by")
    show_full_result_count = False

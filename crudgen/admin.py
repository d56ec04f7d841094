"""Read-only admin for DjangoStorage tables: changes go through the CRUD so revisions stay consistent."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from crudgen.models import StoredResource, StoredRevision


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class StoredRevisionInline(admin.TabularInline):
    model = StoredRevision
    fields = ("number", "revision_id", "parent_revision_id", "created_time", "created_by", "schema_version")
    readonly_fields = fields
    ordering = ("-number",)
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(StoredResource)
class StoredResourceAdmin(ReadOnlyAdmin):
    list_display = ("resource_id", "namespace", "current_revision_id", "is_deleted", "updated_time", "updated_by")
    list_filter = ("namespace", "is_deleted")
    search_fields = ("resource_id", "created_by", "updated_by")
    ordering = ("-created_time",)
    inlines = [StoredRevisionInline]


@admin.register(StoredRevision)
class StoredRevisionAdmin(ReadOnlyAdmin):
    list_display = ("revision_id", "number", "created_time", "created_by", "schema_version")
    list_select_related = ("resource",)
    search_fields = ("revision_id", "resource__resource_id")
    ordering = ("-created_time",)

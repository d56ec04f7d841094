"""Reads of the workspace core: apps, an app's items, one item with its sandbox and disk figure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quotas import ledger
from quotas.models import SandboxActivity, WorkspaceDiskUsage
from workspace.items.config import AppDescriptor, get_config
from workspace.items.filestore import FileEntry, list_files, workspace_prepared
from workspace.items.models import Item

ITEMS_DEFAULT_LIMIT = 50
ITEMS_MAX_LIMIT = 200


@dataclass(frozen=True)
class ItemDetail:
    item: Item
    sandbox: SandboxActivity | None
    disk: WorkspaceDiskUsage | None


def apps() -> list[AppDescriptor]:
    return list(get_config().apps.values())


def app_as_dict(app: AppDescriptor) -> dict[str, Any]:
    resources = app.resources
    return {
        "slug": app.slug,
        "name": app.name,
        "resources": {
            "cpu_cores": resources.cpu_cores,
            "memory_bytes": resources.memory_bytes,
            "pids_max": resources.pids_max,
            "disk_bytes": resources.disk_bytes,
        },
    }


def items_of_app(
    *, app_slug: str, user_id: str, is_staff: bool, before: int | None = None, limit: int = ITEMS_DEFAULT_LIMIT
) -> list[Item]:
    """Newest first, keyset-paginated by id; staff see everyone's items, others their own."""
    rows = Item.objects.filter(app_slug=app_slug)
    if not is_staff:
        rows = rows.filter(created_by=user_id)
    if before is not None:
        rows = rows.filter(pk__lt=before)
    return list(rows.order_by("-pk")[:limit])


def item_detail(item: Item) -> ItemDetail:
    return ItemDetail(item=item, sandbox=ledger.live_row_of_item(item.pk), disk=ledger.disk_usage_of_item(item.pk))


def item_files(item: Item) -> list[FileEntry]:
    return list_files(workspace_prepared(item.pk, item.app_slug))


def sandbox_as_dict(activity: SandboxActivity | None) -> dict[str, Any] | None:
    if activity is None:
        return None
    return {
        "sandbox_id": activity.backend_sandbox_id,
        "backend": activity.backend,
        "cpu_cores": activity.cpu_cores,
        "memory_bytes": activity.memory_bytes,
        "pids_max": activity.pids_max,
        "opened_at": activity.opened_at,
        "last_seen_at": activity.last_seen_at,
        "last_used_at": activity.last_used_at,
        "lease_expires_at": activity.lease_expires_at,
    }


def item_as_dict(item: Item, *, detail: ItemDetail | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": item.pk,
        "app": item.app_slug,
        "title": item.title,
        "owner": item.debtor,
        "pending_owner": item.pending_owner or None,
        "created_by": item.created_by,
        "updated_by": item.updated_by,
        "created_at": item.created_at,
        "updated_at": item.updated_at,
    }
    if detail is not None:
        row["sandbox"] = sandbox_as_dict(detail.sandbox)
        row["disk"] = (
            {"bytes": detail.disk.bytes, "measured_at": detail.disk.measured_at} if detail.disk is not None else None
        )
    return row

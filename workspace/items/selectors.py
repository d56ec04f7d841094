"""Reads of the workspace core: apps, an app's items, one item with its sandbox and disk figure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F, QuerySet
from django.urls import reverse

from collab.actor import Actor
from quotas import ledger
from quotas.host import Handover, ItemFacts, PaidItem
from quotas.models import SandboxActivity, WorkspaceDiskUsage
from workspace.items import running
from workspace.items.access import item_scope
from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import HandoverEvent, Item, RunningExec, payer_of
from workspace.items.workspaces import item_workspace_root
from workspace.sandboxes.filestore import (
    MAX_LISTED,
    FileEntry,
    list_files,
    list_folder,
    relative,
    resolve,
)

ITEMS_DEFAULT_LIMIT = 50
ITEMS_MAX_LIMIT = 200


@dataclass(frozen=True)
class ItemDetail:
    """An item with its live sandbox and last disk measurement; it reads as its item otherwise,
    so the item's output serializer renders it as it is."""

    item: Item
    sandbox: SandboxActivity | None
    disk: WorkspaceDiskUsage | None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.item, name)


@dataclass(frozen=True)
class ItemPage:
    results: list[Item]
    next_before: int | None


def apps() -> list[AppDescriptor]:
    return list(get_config().apps.values())


def items_of_app(
    *, app_slug: str, actor: Actor, before: int | None = None, limit: int = ITEMS_DEFAULT_LIMIT
) -> ItemPage:
    """Newest first, keyset-paginated by id; staff see everyone's items, others their own."""
    rows = item_scope(actor=actor).filter(app_slug=app_slug)
    if before is not None:
        rows = rows.filter(pk__lt=before)
    results = list(rows.order_by("-pk")[:limit])
    return ItemPage(results=results, next_before=results[-1].pk if len(results) == limit else None)


def items_of_creator(*, user_id: str, limit: int) -> list[Item]:
    """The caller's own items of every app, newest first (`item_creator_idx`)."""
    return list(Item.objects.filter(created_by=user_id).order_by("-pk")[:limit])


def item_facts(item_id: str) -> ItemFacts | None:
    """The item's app and payer as the quotas see them; None for no such item."""
    if not item_id.isdigit():
        return None
    row = Item.objects.filter(pk=int(item_id)).values_list("app_slug", "owner", "created_by").first()
    return None if row is None else ItemFacts(app_slug=row[0], payer=payer_of(owner=row[1], creator=row[2]))


def _waiting_for(user_id: str) -> QuerySet[Item]:
    return Item.objects.filter(pending_owner=user_id).exclude(pending_owner="")


def pending_handover_count(*, user_id: str) -> int:
    """How many handovers wait for `user_id`'s answer (the header's badge; `item_pending_owner_idx`)."""
    return _waiting_for(user_id).count() if user_id else 0


def handover_news(*, user_id: str, since: datetime, limit: int) -> list[HandoverEvent]:
    """What became of the handovers that concern `user_id` since `since`, newest first, with their
    items (`handover_event_told_idx`): one query."""
    rows = HandoverEvent.objects.filter(told=user_id, at__gte=since).select_related("item").order_by("-at", "-pk")
    return list(rows[:limit])


def pending_handovers(*, user_id: str, limit: int = 100) -> list[Handover]:
    """The items whose bill someone asked `user_id` to take over, oldest request first
    (`item_pending_owner_idx`)."""
    rows = _waiting_for(user_id).order_by("pending_owner_requested_at", "pk")
    return [
        Handover(
            item_id=str(row.pk),
            app_slug=row.app_slug,
            title=row.title,
            requested_by=row.pending_owner_requested_by,
            requested_at=row.pending_owner_requested_at,
        )
        for row in rows[:limit]
    ]


def paid_for_others(*, user_id: str) -> list[PaidItem]:
    """The items `user_id` pays for but did not create, oldest first: the bills they may hand back."""
    rows = Item.objects.filter(owner=user_id).exclude(created_by=F("owner")).order_by("pk")
    return [
        PaidItem(
            item_id=str(row.pk),
            app_slug=row.app_slug,
            title=row.title,
            created_by=row.created_by,
            url=reverse("ws-item", args=[row.app_slug, row.pk]),
            named_by=row.owner_named_by,
            named_at=row.owner_named_at,
            assigned=row.owner_assigned,
        )
        for row in rows[:100]
    ]


def item_detail(item: Item) -> ItemDetail:
    return ItemDetail(item=item, sandbox=ledger.live_row_of_item(item.pk), disk=ledger.disk_usage_of_item(item.pk))


def item_files(item: Item, *, limit: int = MAX_LISTED) -> list[FileEntry]:
    """Every file and folder of the workspace, by path (the API's list, the agent's)."""
    return list_files(item_workspace_root(item), limit=limit)


def item_folder(item: Item, folder: str = "", *, limit: int = MAX_LISTED) -> list[FileEntry]:
    """What one folder holds, folders first (the item page opens one folder at a time)."""
    return list_folder(item_workspace_root(item), folder, limit=limit)


def running_execs(item: Item) -> list[RunningExec]:
    """The commands running in the item's sandbox for people (the terminal, the exec API)."""
    return running.running_of_item(item)


def item_file_path(item: Item, path: str) -> str:
    """`path` as the file store names it (`a/./b` is `a/b`); one that leaves the workspace is a 400."""
    root = item_workspace_root(item)
    return relative(root, resolve(root, path.strip()))

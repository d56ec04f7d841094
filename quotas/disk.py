"""The disk write check: the item's app limit (exact) and the payer's per-user total (approximate).

The file store calls this for every write that grows a workspace (shrinking, same-size and
delete never reach it, spec "Errors" rule 2). It only refuses: nothing is charged here, the
disk ledger is fed by the mirror sweep alone, so a refused write leaves no trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from collab.errors import QuotaExceeded
from collab.sizes import format_bytes
from quotas import host, selectors
from quotas.limits import TtlMemo, limits_for, register_memo
from quotas.services import quota_error


class WrittenWorkspace(Protocol):
    """The workspace a write grows, as the file store hands it on: its id is its item's. An item's
    (`workspace.items.workspaces.ItemWorkspace`) also carries `app_slug` and `payer`; where they
    are missing or blank, the item's facts are looked up (`item_facts`)."""

    @property
    def workspace_id(self) -> int | str: ...

    @property
    def title(self) -> str:
        """The item's title, which a refusal names it by ("" when the writer does not know it)."""
        ...


class GrowingWrite(Protocol):
    """What the file store hands over (its `WriteIntent`): the changes are staged, not landed."""

    @property
    def workspace(self) -> WrittenWorkspace: ...

    @property
    def delta(self) -> int: ...

    @property
    def attempted(self) -> int: ...


_item_facts: TtlMemo[str, host.ItemFacts | None] = register_memo(TtlMemo())


def item_facts(item_id: str) -> host.ItemFacts | None:
    """The item -> (app, payer) lookup, memoised for 5 s (spec "Limits" 11)."""
    return _item_facts.get(item_id, lambda: host.installed().item_facts(item_id))


def _refusal(error: str, *, used: int, quota: int, delta: int, whose: str, limit: str) -> QuotaExceeded:
    attempted = used + delta
    detail = (
        f"This write would bring {whose} to {format_bytes(attempted)}, above {limit} of {format_bytes(quota)} "
        f"({format_bytes(used)} in use). Delete or shrink files to make room; "
        "My resources lists the items that hold the space."
    )
    return QuotaExceeded(error=error, detail=detail, dimension="disk", used=used, quota=quota, attempted=attempted)


@dataclass(frozen=True)
class _Standing:
    """Where one item's write stands against the limits that bind it."""

    item_id: str
    app_slug: str
    payer: str
    app_limit: int  # 0: none
    user_limit: int | None
    live: int  # the workspace's bytes without this write's staged files
    user_used: int  # the payer's total with `live` for this item (0 without a user limit)


def _standing(write: GrowingWrite) -> _Standing | None:
    """None when no disk limit binds the write (then nothing is read, not even the workspace)."""
    workspace = write.workspace
    item_id = str(workspace.workspace_id)
    app_slug, payer = getattr(workspace, "app_slug", ""), getattr(workspace, "payer", "")
    if not (app_slug and payer):
        facts = item_facts(item_id)
        if facts is None:
            return None
        app_slug, payer = app_slug or facts.app_slug, payer or facts.payer
    quotas_host = host.installed()
    app_limit = quotas_host.app_disk_limit(app_slug) or 0
    user_limit = limits_for(payer).disk
    if not app_limit and user_limit is None:
        return None
    # The staged files already sit in the workspace as temp files until they land; without
    # them the walk gives the size before this write.
    live = max(0, quotas_host.workspace_bytes(item_id) - write.attempted)
    user_used = 0
    if user_limit is not None:
        user_used = selectors.payer_disk_bytes(payer=payer, excluding_item=item_id) + live
    return _Standing(item_id, app_slug, payer, app_limit, user_limit, live, user_used)


def disk_write_headroom(write: GrowingWrite) -> int | None:
    """How many more bytes `write` may still grow by; None when no disk limit binds it.

    The file store asks once while an upload streams in and refuses as soon as it passes this,
    so a write over quota is cut off at most one chunk late instead of being stored whole first.
    """
    standing = _standing(write)
    if standing is None:
        return None
    room = []
    if standing.app_limit:
        room.append(standing.app_limit - standing.live - write.delta)
    if standing.user_limit is not None:
        room.append(standing.user_limit - standing.user_used - write.delta)
    return max(0, min(room))


def disk_write_check(write: GrowingWrite) -> None:
    """Refuses (507) a growing write over the workspace limit or the payer's per-user disk total.

    The workspace limit is the item's app's (the batch gate uses the same, spec "Limits" 9) and
    is checked against the live size, so it is exact. The per-user total is the ledger's last
    measurements of the payer's other items plus this item's live size: approximate, as the spec
    allows. With no per-user disk limit this reads nothing from the database.
    """
    delta = write.delta
    if delta <= 0:
        return
    standing = _standing(write)
    if standing is None:
        return
    refusals = []
    if standing.app_limit and standing.live + delta > standing.app_limit:
        refusals.append(
            _refusal(
                "workspace_quota_exceeded",
                used=standing.live,
                quota=standing.app_limit,
                delta=delta,
                whose=f"the workspace of “{write.workspace.title}”"
                if write.workspace.title
                else f"item {standing.item_id}'s workspace",
                limit=f"the {standing.app_slug} app's workspace disk limit",
            )
        )
    if standing.user_limit is not None and standing.user_used + delta > standing.user_limit:
        refusals.append(
            _refusal(
                "user_quota_exceeded",
                used=standing.user_used,
                quota=standing.user_limit,
                delta=delta,
                whose=f"{standing.payer}'s disk use across all items",
                limit=f"{standing.payer}'s per-user disk limit",
            )
        )
    if refusals:
        raise quota_error(refusals)


def payer_disk_headroom(*, payer: str, item_id: str, item_bytes: int) -> int | None:
    """How much further an item's workspace (now `item_bytes`) may grow under its payer's per-user
    disk total, the other items counted at their last measurement; negative when the payer is
    over it, None when no per-user disk limit binds them (then nothing is read from the database).

    Sandbox code is held to it as the file API is: growth stops at the total, reading and
    shrinking never do.
    """
    limit = limits_for(payer).disk
    if limit is None:
        return None
    return limit - selectors.payer_disk_bytes(payer=payer, excluding_item=item_id) - item_bytes

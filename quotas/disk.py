"""The disk write check: the item's app limit (exact) and the owner's per-user total (approximate).

The file store calls this for every write that grows a workspace (shrinking, same-size and
delete never reach it, spec "Errors" rule 2). It only refuses: nothing is charged here, the
disk ledger is fed by the mirror sweep alone, so a refused write leaves no trace.
"""

from __future__ import annotations

from typing import Protocol

from quotas import host, selectors
from quotas.limits import TtlMemo, limits_for, register_memo
from quotas.services import Refusal, quota_error
from quotas.sizes import format_size


class GrowingWrite(Protocol):
    """What the file store hands over (its `WriteIntent`): the changes are staged, not landed."""

    @property
    def item_id(self) -> int | str: ...

    @property
    def app_slug(self) -> str: ...

    @property
    def owner(self) -> str: ...

    @property
    def delta(self) -> int: ...

    @property
    def attempted(self) -> int: ...


_item_facts: TtlMemo[str, host.ItemFacts | None] = register_memo(TtlMemo())


def item_facts(item_id: str) -> host.ItemFacts | None:
    """The item -> (app, owner) lookup, memoised for 5 s (spec "Limits" 11)."""
    return _item_facts.get(item_id, lambda: host.installed().item_facts(item_id))


def _refusal(error: str, *, used: int, quota: int, delta: int, whose: str, limit: str) -> Refusal:
    attempted = used + delta
    detail = (
        f"This write would bring {whose} to {format_size(attempted)}, above {limit} of {format_size(quota)} "
        f"({format_size(used) if used else '0 bytes'} in use). Delete or shrink files to make room; "
        "My resources lists the items that hold the space."
    )
    return Refusal(body={"error": error, "used": used, "quota": quota, "attempted": attempted, "detail": detail})


def disk_write_check(write: GrowingWrite) -> None:
    """Refuses (507) a growing write over the workspace limit or the owner's per-user disk total.

    The workspace limit is the item's app's (the batch gate uses the same, spec "Limits" 9) and
    is checked against the live size, so it is exact. The per-user total is the ledger's last
    measurements of the owner's other items plus this item's live size: approximate, as the spec
    allows. With no per-user disk limit this reads nothing from the database.
    """
    delta = write.delta
    if delta <= 0:
        return
    item_id = str(write.item_id)
    app_slug, owner = write.app_slug, write.owner
    if not (app_slug and owner):
        facts = item_facts(item_id)
        if facts is None:
            return
        app_slug, owner = app_slug or facts.app_slug, owner or facts.owner
    quotas_host = host.installed()
    app_limit = quotas_host.app_disk_limit(app_slug) or 0
    user_limit = limits_for(owner).disk
    if not app_limit and user_limit is None:
        return
    # The staged files already sit in the workspace as temp files until they land; without
    # them the walk gives the size before this write.
    live = max(0, quotas_host.workspace_bytes(item_id) - write.attempted)
    refusals = []
    if app_limit and live + delta > app_limit:
        refusals.append(
            _refusal(
                "workspace_quota_exceeded",
                used=live,
                quota=app_limit,
                delta=delta,
                whose=f"item {item_id}'s workspace",
                limit=f"the {app_slug} app's workspace disk limit",
            )
        )
    if user_limit is not None:
        used = selectors.owner_disk_bytes(owner=owner, excluding_item=item_id) + live
        if used + delta > user_limit:
            refusals.append(
                _refusal(
                    "user_quota_exceeded",
                    used=used,
                    quota=user_limit,
                    delta=delta,
                    whose=f"{owner}'s disk use across all items",
                    limit=f"{owner}'s per-user disk limit",
                )
            )
    if refusals:
        raise quota_error(refusals)

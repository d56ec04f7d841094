"""Writes of the workspace core: items, files, exec and sandbox lifecycle, sweeps."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.db import transaction

from collab import clock
from collab.converters import is_row_id
from collab.errors import ApiError
from collab.identity import unknown_user_ids
from quotas import ledger
from workspace.items import filebatch, filestore, volumes
from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import Item
from workspace.items.sandboxes import lifecycle
from workspace.items.sandboxes.base import Command, CommandInvalid, validate_command


def checked_owner(owner: str) -> str:
    owner = owner.strip()
    if owner and unknown_user_ids([owner]):
        raise ApiError(status_code=400, error="unknown_user", detail=f"{owner!r} is not in the user directory.")
    return owner


def _bill_to(item: Item, *, owner: str, user_id: str, is_staff: bool) -> list[str]:
    """Who pays for `item` (docs/ARCHITECTURE.md §5: nobody is billed without consent); returns the changed fields.

    Staff assign directly, and anyone may name themselves. Naming someone else only asks them:
    the item waits in `pending_owner` until they accept on their My resources page, and the
    current payer pays meanwhile. A blank owner is the creator.
    """
    wanted = checked_owner(owner) or item.created_by
    before = (item.owner, item.pending_owner, item.pending_owner_requested_by)
    if is_staff or wanted == user_id or wanted == item.debtor:
        item.owner = wanted
        item.pending_owner = item.pending_owner_requested_by = ""
        item.pending_owner_requested_at = None
    else:
        item.pending_owner, item.pending_owner_requested_by = wanted, user_id
        item.pending_owner_requested_at = clock.now()
    if (item.owner, item.pending_owner, item.pending_owner_requested_by) == before:
        return []
    return ["owner", "pending_owner", "pending_owner_requested_by", "pending_owner_requested_at"]


def checked_title(title: str, *, noun: str = "An item") -> str:
    """The title without surrounding blanks; empty or longer than the column is a 400, never cut."""
    cleaned = title.strip()
    if not cleaned:
        raise ApiError(status_code=400, error="validation_error", detail=f"{noun} needs a title.")
    limit = Item._meta.get_field("title").max_length or 0
    if len(cleaned) > limit:
        raise ApiError(
            status_code=400,
            error="title_too_long",
            detail=f"A title has at most {limit} characters; this one has {len(cleaned)}.",
            limit=limit,
        )
    return cleaned


@transaction.atomic
def item_create(*, app: AppDescriptor, title: str, owner: str = "", user_id: str, is_staff: bool = False) -> Item:
    """A new item of `app`; the creator pays unless staff name someone else or that person accepts."""
    item = Item(app_slug=app.slug, title=checked_title(title), owner=user_id)
    item.stamp_created(user_id)
    _bill_to(item, owner=owner, user_id=user_id, is_staff=is_staff)
    item.save()
    # After commit: making and mounting a workspace image must not hold the database's write lock.
    transaction.on_commit(lambda: filestore.workspace_prepared(item.pk, item.app_slug))
    return item


@transaction.atomic
def item_update(
    *, item: Item, user_id: str, is_staff: bool, title: str | None = None, owner: str | None = None
) -> Item:
    """Owner locking (docs/ARCHITECTURE.md §8): only the creator or staff may change who pays for an item,
    and handing the bill to someone else waits for their consent (`_bill_to`)."""
    fields: list[str] = []
    if owner is not None and (owner.strip() != item.owner or item.pending_owner):
        if not (is_staff or item.created_by == user_id):
            raise ApiError(
                status_code=403, error="owner_locked", detail="Only the item's creator or staff may change its owner."
            )
        fields += _bill_to(item, owner=owner, user_id=user_id, is_staff=is_staff)
    if title is not None and title.strip() != item.title:
        item.title = checked_title(title)
        fields.append("title")
    if fields:
        item.stamp_updated(user_id)
        item.save(update_fields=[*fields, "updated_by", "updated_at"])
    return item


def items_delete(*, item_ids: Sequence[int]) -> int:
    """Deletes items (staff, in admin): each live sandbox is shut down first, and one the backend
    cannot confirm closed refuses the delete (503) with nothing deleted. Then, in one transaction,
    the rows go with what hangs off them (messages, an investigation; run records stay, without
    their item) and the disk ledger forgets them; the workspaces are removed once that commits."""
    items = list(Item.objects.filter(pk__in=[item_id for item_id in item_ids if is_row_id(item_id)]))
    for item in items:
        lifecycle.sandbox_close(item=item)
    directories = [filestore.workspace_dir(item.pk) for item in items]
    with transaction.atomic():
        ledger.disk_usage_forget(item.pk for item in items)
        Item.objects.filter(pk__in=[item.pk for item in items]).delete()
        transaction.on_commit(lambda: [volumes.workspace_remove(directory) for directory in directories])
    return len(items)


@transaction.atomic
def item_handover_answer(*, item_id: int, user_id: str, accept: bool) -> Item:
    """The addressee of a handover accepts (they pay from now on) or declines (nothing changes
    but the request, which goes). Anyone else, or no waiting handover, is 404."""
    in_range = is_row_id(item_id)
    item = (
        Item.objects.select_for_update().filter(pk=item_id, pending_owner=user_id).first()
        if user_id and in_range
        else None
    )
    if item is None:
        raise ApiError(
            status_code=404, error="no_handover", detail=f"No handover of item {item_id} is waiting for you."
        )
    if accept:
        item.owner = user_id
    item.pending_owner = item.pending_owner_requested_by = ""
    item.pending_owner_requested_at = None
    item.stamp_updated(user_id)
    item.save(
        update_fields=[
            "owner", "pending_owner", "pending_owner_requested_by", "pending_owner_requested_at",
            "updated_by", "updated_at",
        ]
    )  # fmt: skip
    return item


@transaction.atomic
def item_bill_return(*, item_id: int, user_id: str, is_staff: bool) -> Item:
    """Ends an accepted handover: the item's creator pays again. The payer may (consent given can
    be taken back), as may the creator and staff, who could name the creator as payer anyway
    (`_bill_to`). Anyone else, or an item its creator pays for already, is 404. A handover that
    is still waiting for an answer stays; a live sandbox stays counted to whoever it was opened
    for until it closes."""
    item = Item.objects.select_for_update().filter(pk=item_id).first() if user_id and is_row_id(item_id) else None
    if item is None or item.debtor == item.created_by or not (is_staff or user_id in (item.owner, item.created_by)):
        raise ApiError(
            status_code=404, error="no_handover", detail=f"There is no handover of item {item_id} for you to end."
        )
    item.owner = item.created_by
    item.stamp_updated(user_id)
    item.save(update_fields=["owner", "updated_by", "updated_at"])
    return item


def workspace_ref(item: Item) -> filestore.WorkspaceRef:
    return filestore.WorkspaceRef(item_id=item.pk, app_slug=item.app_slug, owner=item.debtor)


def file_write(*, item: Item, path: str, chunks: Iterable[bytes]) -> filestore.FileChange:
    """Atomic write of one file; no database work, so a write costs only the item lookup."""
    return filestore.write_file(workspace_ref(item), path, chunks)


def file_delete(*, item: Item, path: str) -> filestore.FileChange:
    return filestore.delete_path(workspace_ref(item), path)


def file_move(*, item: Item, source: str, target: str) -> filestore.FileChange:
    return filestore.move_path(workspace_ref(item), source, target)


def folder_create(*, item: Item, path: str) -> filestore.FileChange:
    return filestore.make_folder(workspace_ref(item), path)


def files_batch(*, item: Item, operations: list[dict[str, Any]]) -> filebatch.BatchReport:
    return filebatch.run_batch(workspace_ref(item), operations)


def exec_timeout(requested: float | None) -> float:
    sandbox = get_config().sandbox
    if requested is None:
        return sandbox.exec_timeout
    if requested <= 0 or requested > sandbox.exec_timeout_max:
        raise ApiError(
            status_code=400,
            error="invalid_timeout",
            detail=f"timeout must be above 0 and at most {sandbox.exec_timeout_max:g} seconds.",
        )
    return float(requested)


def _valid_command(command: Any) -> Command:
    try:
        return validate_command(command)
    except CommandInvalid as exc:
        raise ApiError(status_code=400, error="invalid_command", detail=str(exc)) from exc


def item_exec(*, item: Item, app: AppDescriptor, command: Any, timeout: float | None = None) -> lifecycle.ExecOutcome:
    """Runs `command` in the item's sandbox, opening one through admission when none is live.

    Not one transaction: the command runs for seconds and the ledger steps inside commit on
    their own, so a crash mid-command leaves the sandbox counted only until its lease runs out.
    """
    return lifecycle.sandbox_exec(item=item, app=app, command=_valid_command(command), timeout=exec_timeout(timeout))


def item_exec_streaming(
    *, item: Item, app: AppDescriptor, command: Any, timeout: float | None = None
) -> Iterator[lifecycle.ExecStarted | tuple[str, bytes] | lifecycle.ExecOutcome]:
    """`item_exec` as it happens. The command, the timeout and the quota gate are checked (and
    the sandbox opened) before this returns, so their refusals come back as plain errors; the
    iterator then yields the sandbox it runs in at once (a quiet command still shows it opened
    one), its output chunks, and ends with the outcome."""
    valid, seconds = _valid_command(command), exec_timeout(timeout)
    activity, opened = ready = lifecycle.sandbox_for_item(item=item, app=app)
    started = lifecycle.ExecStarted(activity=activity, opened=opened, timeout=seconds)
    events = lifecycle.sandbox_exec_streaming(item=item, app=app, command=valid, timeout=seconds, ready=ready)
    return itertools.chain([started], events)


def item_sandbox_close(*, item: Item) -> int:
    return lifecycle.sandbox_close(item=item)


def workspaces_sweep() -> int:
    """The mirror sweep: measure the workspaces whose owner has a disk limit, for the disk ledger.

    Items of owners without a per-user disk limit are not walked at all (with no disk quota
    configured a sweep reads no workspace); they are still handed over, unmeasured, so a row
    left from an earlier owner who had a limit is forgotten.
    """
    rows = [
        (str(pk), slug, owner or creator)
        for pk, slug, owner, creator in Item.objects.order_by("pk").values_list("pk", "app_slug", "owner", "created_by")
    ]
    tracked = ledger.owners_with_disk_limit({owner for _, _, owner in rows})
    before = ledger.disk_bytes_by_item()
    measurements = [
        ledger.DiskMeasurement(
            item_id=item_id,
            app_slug=slug,
            owner=owner,
            bytes=filestore.workspace_bytes(filestore.workspace_dir(item_id)) if owner in tracked else 0,
        )
        for item_id, slug, owner in rows
    ]
    written = ledger.record_disk_measurements(measurements)
    # An owner the sweep found over their total stops growing now, not at their next command.
    lifecycle.sandboxes_hold_to_disk_totals([m for m in measurements if m.owner in tracked], before=before)
    return written

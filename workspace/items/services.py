"""Writes of the workspace core: items, files, exec and sandbox lifecycle, sweeps."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.db import transaction

from collab import clock
from collab.actor import Actor
from collab.converters import is_row_id
from collab.errors import Forbidden, Invalid, NotFound
from collab.identity import get_user_directory, unknown_user_ids
from collab.slots import SlotForCommand
from quotas import ledger
from quotas.ledger import LiveRowRead
from quotas.models import SandboxActivity
from workspace.items import lifecycle, pool, running
from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import HandoverEvent, Item, RunningExec, SandboxHost, payer_of
from workspace.items.workspaces import item_workspace_ref, item_workspace_root
from workspace.sandboxes import filebatch, filestore, volumes
from workspace.sandboxes.base import Command, CommandInvalid, OpenedSandbox, validate_command

# The longest owner a form or the API takes (the API's field says the same): longer is neither an id
# nor a name, and is refused before the directory is read.
MAX_OWNER_CHARS = 150


def payer_id(typed: str) -> str:
    """The user id that `typed` names: an id, or a display name ("Carol Nguyen", any case) that one person
    alone has, as a new user types it; otherwise the text stripped, for `checked_payer` to refuse."""
    return _resolved_payer(typed)[0]


def _resolved_payer(typed: str) -> tuple[str, list[str]]:
    """`payer_id`'s answer, and the ids of the people whose name `typed` is where it is no id (the
    directory is read once for both)."""
    typed = typed.strip()
    if not typed or len(typed) > MAX_OWNER_CHARS or not unknown_user_ids([typed]):
        return typed, []
    named = _ids_named(typed)
    return (named[0] if len(named) == 1 else typed), named


def _ids_named(name: str) -> list[str]:
    wanted = " ".join(name.split()).casefold()
    return [user.id for user in get_user_directory().all() if " ".join(user.name.split()).casefold() == wanted]


def checked_payer(payer: str) -> str:
    if len(payer.strip()) > MAX_OWNER_CHARS:
        raise Invalid(
            error="unknown_user",
            detail=f"An owner is a user id or a person's name of at most {MAX_OWNER_CHARS} characters.",
        )
    resolved, named = _resolved_payer(payer)
    if len(named) > 1:
        raise Invalid(
            error="ambiguous_user",
            detail=f"{resolved!r} is the name of {len(named)} people ({', '.join(named)}): give the user id of "
            "the one you mean.",
        )
    if resolved and not named and unknown_user_ids([resolved]):
        raise Invalid(error="unknown_user", detail=f"{resolved!r} is not in the user directory.")
    return resolved


def _bill_to(item: Item, *, payer: str, actor: Actor) -> list[str]:
    """Who pays for `item` (docs/ARCHITECTURE.md §5: nobody is billed without consent); returns the changed fields.

    Staff assign directly, and anyone may name themselves. Naming someone else only asks them:
    the item waits in `pending_owner` until they accept on their My resources page, and the
    current payer pays meanwhile. A blank `payer` is the creator.
    """
    wanted = checked_payer(payer) or item.created_by
    user_id = actor.user_id
    before = (item.owner, item.pending_owner, item.pending_owner_requested_by)
    if actor.is_staff or wanted == user_id or wanted == item.payer:
        if wanted != item.payer:
            _payer_named(item, payer=wanted, named_by=user_id, assigned=wanted != user_id)
        item.owner = wanted
        item.pending_owner = item.pending_owner_requested_by = ""
        item.pending_owner_requested_at = None
    else:
        item.pending_owner, item.pending_owner_requested_by = wanted, user_id
        item.pending_owner_requested_at = clock.now()
    if (item.owner, item.pending_owner, item.pending_owner_requested_by) == before:
        return []
    return ["owner", "pending_owner", "pending_owner_requested_by", "pending_owner_requested_at", *_NAMED]


# The record of how the payer came to pay (`Item.owner_named_by`), saved with every change of payer.
_NAMED = ["owner_named_by", "owner_named_at", "owner_assigned"]


def _payer_named(item: Item, *, payer: str, named_by: str, assigned: bool) -> None:
    """Records who made `payer` pay and whether staff did so without asking; none for the creator."""
    if payer == item.created_by:
        item.owner_named_by, item.owner_named_at, item.owner_assigned = "", None, False
    else:
        item.owner_named_by, item.owner_named_at, item.owner_assigned = named_by, clock.now(), assigned


def checked_title(title: str, *, noun: str = "An item") -> str:
    """The title without surrounding blanks; empty or longer than the column is a 400, never cut."""
    cleaned = title.strip()
    if not cleaned:
        raise Invalid(error="validation_error", detail=f"{noun} needs a title.")
    limit = Item._meta.get_field("title").max_length or 0
    if len(cleaned) > limit:
        raise Invalid(
            error="title_too_long",
            detail=f"A title has at most {limit} characters; this one has {len(cleaned)}.",
            limit=limit,
        )
    return cleaned


@transaction.atomic
def item_create(*, app: AppDescriptor, title: str, payer: str = "", actor: Actor) -> Item:
    """A new item of `app`; the creator pays unless staff name someone else or that person accepts."""
    item = Item(app_slug=app.slug, title=checked_title(title), owner=actor.user_id)
    item.stamp_created(actor.user_id)
    _bill_to(item, payer=payer, actor=actor)
    item.save()
    # After commit: making and mounting a workspace image must not hold the database's write lock.
    transaction.on_commit(lambda: item_workspace_root(item))
    return item


@transaction.atomic
def item_update(*, item: Item, actor: Actor, title: str | None = None, payer: str | None = None) -> Item:
    """Owner locking (docs/ARCHITECTURE.md §8): only the creator or staff may change who pays for an item,
    and handing the bill to someone else waits for their consent (`_bill_to`)."""
    fields: list[str] = []
    if payer is not None and (payer_id(payer) != item.owner or item.pending_owner):
        if not (actor.is_staff or actor.is_user(item.created_by)):
            raise Forbidden(error="owner_locked", detail="Only the item's creator or staff may change its owner.")
        fields += _bill_to(item, payer=payer, actor=actor)
    if title is not None and title.strip() != item.title:
        item.title = checked_title(title)
        fields.append("title")
    if fields:
        item.stamp_updated(actor.user_id)
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


def _handover_told(item: Item, *, outcome: str, by: str, told: str) -> None:
    """Keeps what became of a handover for `told` (their dashboard), unless they did it themselves."""
    if told and told != by:
        HandoverEvent.objects.create(item=item, outcome=outcome, by=by, told=told, at=clock.now())


@transaction.atomic
def item_handover_answer(*, item_id: int, actor: Actor, accept: bool) -> Item:
    """The addressee of a handover accepts (they pay from now on) or declines (nothing changes
    but the request, which goes). Anyone else, or no waiting handover, is 404: staff too, since
    nobody pays without their own consent."""
    user_id, in_range = actor.user_id, is_row_id(item_id)
    item = (
        Item.objects.select_for_update().filter(pk=item_id, pending_owner=user_id).first()
        if user_id and in_range
        else None
    )
    if item is None:
        raise NotFound(error="no_handover", detail=f"No handover of item {item_id} is waiting for you.")
    asked_by = item.pending_owner_requested_by
    if accept:
        _payer_named(item, payer=user_id, named_by=asked_by, assigned=False)
        item.owner = user_id
    outcome = HandoverEvent.Outcome.ACCEPTED if accept else HandoverEvent.Outcome.DECLINED
    _handover_told(item, outcome=outcome, by=user_id, told=asked_by)
    item.pending_owner = item.pending_owner_requested_by = ""
    item.pending_owner_requested_at = None
    item.stamp_updated(user_id)
    item.save(
        update_fields=[
            "owner", "pending_owner", "pending_owner_requested_by", "pending_owner_requested_at",
            *_NAMED, "updated_by", "updated_at",
        ]
    )  # fmt: skip
    return item


@transaction.atomic
def item_bill_return(*, item_id: int, actor: Actor) -> Item:
    """Ends an accepted handover: the item's creator pays again. The payer may (consent given can
    be taken back), as may the creator and staff, who could name the creator as payer anyway
    (`_bill_to`). Anyone else, or an item its creator pays for already, is 404. A handover that
    is still waiting for an answer stays; a live sandbox stays counted to whoever it was opened
    for until it closes."""
    user_id, is_staff = actor.user_id, actor.is_staff
    item = Item.objects.select_for_update().filter(pk=item_id).first() if user_id and is_row_id(item_id) else None
    if item is None or item.payer == item.created_by or not (is_staff or user_id in (item.owner, item.created_by)):
        raise NotFound(error="no_handover", detail=f"There is no handover of item {item_id} for you to end.")
    _handover_told(item, outcome=HandoverEvent.Outcome.RETURNED, by=user_id, told=item.created_by)
    item.owner = item.created_by
    _payer_named(item, payer=item.created_by, named_by=user_id, assigned=False)
    item.stamp_updated(user_id)
    item.save(update_fields=["owner", *_NAMED, "updated_by", "updated_at"])
    return item


def file_write(*, item: Item, path: str, chunks: Iterable[bytes]) -> filestore.FileChange:
    """Atomic write of one file; no database work, so a write costs only the item lookup."""
    return filestore.write_file(item_workspace_ref(item), path, chunks)


def file_delete(*, item: Item, path: str) -> filestore.FileChange:
    return filestore.delete_path(item_workspace_ref(item), path)


def file_move(*, item: Item, source: str, target: str) -> filestore.FileChange:
    return filestore.move_path(item_workspace_ref(item), source, target)


def file_truncate(*, item: Item, path: str, size: int) -> filestore.FileChange:
    """Keeps the file's first `size` bytes: how the payer of an item shrinks a file without reading
    or writing its content (docs/ARCHITECTURE.md §5); always allowed, even over quota."""
    return filestore.truncate_file(item_workspace_ref(item), path, size)


def folder_create(*, item: Item, path: str) -> filestore.FileChange:
    return filestore.make_folder(item_workspace_ref(item), path)


def files_batch(*, item: Item, operations: list[dict[str, Any]]) -> filebatch.BatchReport:
    return filebatch.run_batch(item_workspace_ref(item), operations)


def exec_timeout(requested: float | None) -> float:
    sandbox = get_config().sandbox
    if requested is None:
        return sandbox.exec_timeout
    if requested <= 0 or requested > sandbox.exec_timeout_max:
        raise Invalid(
            error="invalid_timeout",
            detail=f"timeout must be above 0 and at most {sandbox.exec_timeout_max:g} seconds.",
        )
    return float(requested)


def _valid_command(command: Any) -> Command:
    try:
        return validate_command(command)
    except CommandInvalid as exc:
        raise Invalid(error="invalid_command", detail=str(exc)) from exc


def item_exec(
    *,
    item: Item,
    app: AppDescriptor,
    command: Any,
    actor: Actor | None,
    timeout: float | None = None,
    live_row: LiveRowRead | None = None,
) -> lifecycle.ExecOutcome:
    """Runs `command` in the item's sandbox, opening one through admission when none is live, in
    one of `actor`'s command slots (429 when they have none left); None when the caller holds
    the person's slot already (an agent turn, which took one for the whole turn). Run for a
    person, it is listed while it runs, and they (or staff) may stop it (`item_exec_stop`).
    `live_row`: the item's live sandbox row when the caller read it with the item.

    Not one transaction: the command runs for seconds and the ledger steps inside commit on
    their own, so a crash mid-command leaves the sandbox counted only until its lease runs out.
    """
    return lifecycle.outcome_of(
        item_exec_events(item=item, app=app, command=command, actor=actor, timeout=timeout, live_row=live_row)
    )


def item_exec_events(
    *,
    item: Item,
    app: AppDescriptor,
    command: Any,
    actor: Actor | None,
    timeout: float | None = None,
    live_row: LiveRowRead | None = None,
) -> Iterator[lifecycle.ExecEvent]:
    """`item_exec` as it happens: `ExecStarted` (the sandbox it runs in, the id that stops it) once
    the command is recorded and about to start, its output chunks, the outcome last; driven from
    the event loop, its waits too (collab.waits). The command and the timeout are checked before
    this returns; the person's slot, the quota gate and the sandbox come with the first step, so a
    caller that runs that step first (`collab.waits.primed`) meets their refusals before anything
    is sent. The slot is given back when the events end, or when they are closed (the client went
    away), started or not."""
    valid, seconds = _valid_command(command), exec_timeout(timeout)
    if actor is None:
        return lifecycle.sandbox_exec_streaming(item=item, app=app, command=valid, timeout=seconds)
    return _exec_in_a_slot(item=item, app=app, command=valid, seconds=seconds, actor=actor, live_row=live_row)


def _exec_in_a_slot(
    *, item: Item, app: AppDescriptor, command: Command, seconds: float, actor: Actor, live_row: LiveRowRead | None
) -> Iterator[lifecycle.ExecEvent]:
    slot = SlotForCommand(user_id=actor.user_id, seconds=seconds)
    exec_id = running.new_exec_id()

    def run(
        ready: tuple[SandboxActivity, bool], unattached: OpenedSandbox | None = None
    ) -> Iterator[lifecycle.ExecEvent]:
        return lifecycle.sandbox_exec_streaming(
            item=item,
            app=app,
            command=command,
            timeout=seconds,
            ready=ready,
            unattached=unattached,
            exec_id=exec_id,
            requested_by=actor.user_id,
            slot=slot,
        )

    try:
        ready = yield from lifecycle.live_sandbox_waiting(item=item, live_row=live_row)
        if ready is None:
            # A sandbox is opened only for someone who has a slot left.
            slot.take()
            activity, unattached = yield from lifecycle.sandbox_open_for_exec_waiting(item=item, app=app)
            yield from run((activity, unattached is not None), unattached)
            return
        try:
            # On a live sandbox the slot is taken in the transaction that records the command, the
            # first one without looking at the others (one round trip for that whole transaction).
            slot.claim_when_starting()
            yield from run(ready)
        except lifecycle.StartConflict:
            # The person's first slot is held: nothing of that attempt was kept, nothing ran.
            slot.take_when_starting()
            yield from run(ready)
    finally:
        slot.release()


def item_sandbox_close(*, item: Item, actor: Actor) -> int:
    """Shuts the item's sandbox down for `actor`, whom a command it stops names as the closer."""
    return lifecycle.sandbox_close(item=item, closed_by=actor.user_id)


def sandbox_host_drain(*, url: str, draining: bool, actor: Actor) -> bool:
    """An operator drains a sandbox host of the pool (no new sandbox goes there; the ones it runs
    go on) or puts it back. Staff only; a URL the config does not name is 404. True when it changed."""
    _pool_host_for(url=url, actor=actor)
    return bool(pool.host_drain(url=url, draining=draining, by=actor.user_id))


def sandbox_host_sandboxes_close(*, url: str, actor: Actor) -> int:
    """An operator closes every sandbox on a host of the pool (after draining it); a command it
    cuts off says who closed it. Returns how many it closed."""
    _pool_host_for(url=url, actor=actor)
    return lifecycle.host_sandboxes_close(host=url, closed_by=actor.user_id)


def _pool_host_for(*, url: str, actor: Actor) -> None:
    if not actor.is_staff:
        raise Forbidden(error="staff_only", detail="Only staff operate the sandbox hosts.")
    if url not in pool.pool_urls() and not SandboxHost.objects.filter(url=url).exists():
        raise NotFound(error="no_such_host", detail="The config names no such sandbox host.")


def workspaces_sweep() -> int:
    """The mirror sweep: measure the workspaces whose payer has a disk limit, for the disk ledger.

    Items of payers without a per-user disk limit are not walked at all (with no disk quota
    configured a sweep reads no workspace); they are still handed over, unmeasured, so a row
    left from an earlier payer who had a limit is forgotten.
    """
    rows = [
        (str(pk), slug, payer_of(owner=owner, creator=creator))
        for pk, slug, owner, creator in Item.objects.order_by("pk").values_list("pk", "app_slug", "owner", "created_by")
    ]
    tracked = ledger.payers_with_disk_limit({payer for _, _, payer in rows})
    before = ledger.disk_bytes_by_item()
    measurements = [
        ledger.DiskMeasurement(
            item_id=item_id,
            app_slug=slug,
            payer=payer,
            bytes=filestore.workspace_bytes(filestore.workspace_dir(item_id)) if payer in tracked else 0,
        )
        for item_id, slug, payer in rows
    ]
    written = ledger.record_disk_measurements(measurements)
    # A payer the sweep found over their total stops growing now, not at their next command.
    lifecycle.sandboxes_hold_to_disk_totals([m for m in measurements if m.payer in tracked], before=before)
    return written


def item_exec_stop(*, item: Item, exec_id: str, actor: Actor) -> RunningExec:
    """Stops a command running in the item's sandbox, leaving the sandbox and everything else in
    it running; its result then says who stopped it. Its requester may, and staff; anyone else
    who may use the item is refused (403 `not_your_command`). A command that is not running
    (any more) is 404 `no_running_command`."""
    user_id, is_staff = actor.user_id, actor.is_staff
    if not running.is_exec_id(exec_id):
        raise NotFound(error="no_running_command", detail="No command with that id is running in this item.")
    command = RunningExec.objects.filter(pk=exec_id, item=item, ends_by__gt=clock.now()).first()
    if command is None:
        raise NotFound(error="no_running_command", detail=f"No command {exec_id} is running in this item.")
    if not (is_staff or command.requested_by == user_id):
        raise Forbidden(
            error="not_your_command",
            detail=f"{command.requested_by} started this command; only they (or staff) may stop it.",
        )
    # Named before the kill, so the command's result finds who stopped it however fast it ends.
    RunningExec.objects.filter(pk=exec_id).update(stopped_by=user_id)
    stopped = lifecycle.command_stop(sandbox=command, exec_id=exec_id)
    if not stopped:
        raise NotFound(error="no_running_command", detail=f"Command {exec_id} had already finished.")
    command.stopped_by = user_id
    return command


def item_exec_stop_for_shutdown(*, exec_id: str) -> None:
    """Stops a command this server runs because the server shuts down (workspace/serving.py
    `drain`); its result then says so. Nothing when it ended meanwhile."""
    command = RunningExec.objects.filter(pk=exec_id).first()
    if command is None:
        return
    RunningExec.objects.filter(pk=exec_id).update(stopped_by=running.SERVER_SHUTDOWN)
    lifecycle.command_stop(sandbox=command, exec_id=exec_id)

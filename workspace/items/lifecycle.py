"""Opening, using, probing and closing item sandboxes, with the ledger kept in step.

These run backend calls (processes, HTTP) and so are not one database transaction: each ledger
step is its own short write, and the order is chosen so a failure leaves nothing counted that is
not really there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Protocol, TypeVar

from django.db import IntegrityError

from collab import clock
from collab.errors import Conflict, DomainError, Misconfigured, Unavailable
from collab.rows import bookkeeping
from collab.waits import Readable, finished_here, pausing, waited_here
from quotas import ledger
from quotas.disk import payer_disk_headroom
from quotas.limits import limits_for, limits_for_many
from quotas.models import SandboxActivity
from workspace.items import pool, running
from workspace.items.admission import before_sandbox_open
from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import Item
from workspace.items.terminal_slots import terminals_close_with_sandbox
from workspace.items.workspaces import item_workspace_root
from workspace.sandboxes import registry, volumes
from workspace.sandboxes.base import (
    MISCONFIGURED,
    Command,
    EndReason,
    ExecResult,
    OpenedSandbox,
    SandboxBackend,
    SandboxGone,
    SandboxHostUnreachable,
    SandboxMisconfigured,
    SandboxUnavailable,
)
from workspace.sandboxes.filestore import workspace_bytes, workspace_dir

logger = logging.getLogger(__name__)
T = TypeVar("T")
Reason = SandboxActivity.CloseReason
# How long a request waits for a sandbox another request is opening for the same item.
_OPENING_WAIT_SECONDS = 20.0
# Reconciliation leaves alone sandboxes younger than this: they may be opening right now.
RECONCILE_GRACE = timedelta(minutes=2)
_DISK_STOP_NOTE = (
    "\n[The workspace is over its app's disk limit, so its sandbox was stopped. Delete or shrink files to go on.]\n"
)
_USER_DISK_STOP_NOTE = (
    "\n[This command grew the workspace while its owner is over their per-user disk total, so the sandbox was "
    "stopped. Delete or shrink files (here or in other items: My resources lists them) to go on.]\n"
)
_BROKEN_NOTE = (
    "\n[The sandbox stopped working during this command (the process holding it open was killed), so it was "
    "closed. The next command opens a new one.]\n"
)
_REPLACED_NOTE = (
    "[The item's sandbox had stopped working (the process holding it open was gone), so it was closed and this "
    "command runs in a new one: background processes and /tmp of the old one are gone.]\n"
)


@dataclass(frozen=True)
class ExecStarted:
    """A streamed exec's first event: the sandbox is ready and the command starts, with the
    seconds it may run before it is stopped and the id that stops it (blank: no stopping)."""

    activity: SandboxActivity
    opened: bool
    timeout: float
    exec_id: str = ""


@dataclass(frozen=True)
class ExecOutcome:
    result: ExecResult
    activity: SandboxActivity
    opened: bool
    closed: bool = False  # the sandbox was stopped after the command (its workspace passed its disk limit)
    exec_id: str = ""


@dataclass(frozen=True)
class SweepCounts:
    probed: int = 0
    refreshed: int = 0
    closed: int = 0


class OnBackend(Protocol):
    """A row that names where its sandbox runs: a ledger row, a running command, a terminal."""

    backend: str
    host: str


def backend_of(row: OnBackend) -> SandboxBackend:
    """The backend that runs `row`'s sandbox; rows keep their backend and host even if the config
    changes. An http row from before pools (no host) is on the first configured host."""
    return backend_at(row.backend, row.host)


def backend_at(name: str, host: str = "") -> SandboxBackend:
    if name == "http" and not host:
        host = next(iter(get_config().sandbox.hosts), "")
    return registry.backend_named(name, host_url=host)


def unavailable_error(exc: Exception) -> DomainError:
    """What a caller hears when the backend failed: a host that does not answer is named (503
    `sandbox_host_unreachable` with Retry-After), and no new sandbox goes there until it answers."""
    if isinstance(exc, SandboxHostUnreachable):
        pool.host_unreachable_noted(url=exc.host, problem=str(exc))
        name = pool.host_name(exc.host)
        return Unavailable(
            error="sandbox_host_unreachable",
            detail=f"The sandbox host {name}, where this item's sandbox runs, does not answer, so nothing ran. "
            "Try again in a moment: once its sandbox stops counting, the next command opens a new one on a host "
            "that answers.",
            retry_after=pool.HOST_RETRY_AFTER_SECONDS,
            host=name,
        )
    # Other reasons name internal hosts, ports and paths: they go to the log and to staff on
    # /healthz, not to whoever ran the command.
    if isinstance(exc, SandboxMisconfigured):
        logger.error("sandbox backend misconfigured: %s", exc)
        return Misconfigured(
            error=MISCONFIGURED,
            detail=(
                "Sandboxes cannot start on this server because of how it is configured, so nothing ran; "
                "waiting will not help. Please tell its administrator (the server log and /healthz say what to fix)."
            ),
        )
    logger.warning("sandbox backend unavailable: %s", exc)
    return Unavailable(
        error="sandbox_host_unavailable",
        retry_after=pool.HOST_RETRY_AFTER_SECONDS,
        detail="The sandbox backend cannot be reached right now, so nothing ran. Try again in a moment.",
    )


def _shut_down(activity: SandboxActivity, *, reason: str, strict: bool, closed_by: str = "") -> bool:
    """Stops the processes, then forgets the row (False if it was forgotten already); `strict`
    refuses to forget what it could not stop, except a row whose lease ran out on a host that does
    not answer: that sandbox died with its host (or is one reconciliation closes when the host is
    back), and nobody pays for it. Why and by whom go on the row before its processes die, so a
    command the close cuts off can say so (`running.explained`)."""
    ledger.activity_closing(activity_id=activity.pk, reason=reason, closed_by=closed_by)
    # Read again once marked: an opening exec may have stored its sandbox's id since the caller
    # read the row (`_attach` refuses a row marked closing, so none is stored after this).
    stored = SandboxActivity.current.filter(pk=activity.pk).values_list("backend_sandbox_id", flat=True).first()
    sandbox_id = stored or activity.backend_sandbox_id
    if sandbox_id:
        try:
            backend_of(activity).close(sandbox_id)
        except SandboxUnavailable as exc:
            if strict and not (reason == Reason.EXPIRED and isinstance(exc, SandboxHostUnreachable)):
                ledger.activity_closing(activity_id=activity.pk, reason="", closed_by="")
                raise unavailable_error(exc) from exc
            logger.warning("could not reach the backend to close %s: %s", activity, exc)
    closed = ledger.activity_close(activity_id=activity.pk, reason=reason, closed_by=closed_by)
    terminals_close_with_sandbox(activity.pk)
    return closed


# Opening a sandbox may wait for the one another request is opening for the same item: these are
# generators that yield that wait (collab.waits), so a request driven from the event loop waits
# without a thread; the sync forms below wait in their own thread.
Waiting = Generator[Readable, None, T]


def _opened_and_attached(item: Item, app: AppDescriptor) -> Waiting[tuple[SandboxActivity, bool]]:
    activity, opened = yield from _opening(item, app)
    if opened is None:
        return activity, False
    # Bookkeeping too: the admission's row is what counts the sandbox, and a sandbox whose id a
    # crash of the database server lost is one the ledger does not know, which reconciliation closes.
    with bookkeeping(savepoint=False):
        attached = _attach(activity, opened, lease=get_config().sandbox.lease)
    if not attached:
        _honour_close_while_opening(activity, opened)
    return activity, True


def _opening(item: Item, app: AppDescriptor) -> Waiting[tuple[SandboxActivity, OpenedSandbox | None]]:
    """Opens the item's sandbox through admission; the ledger's row does not hold its backend id
    yet (`_attach` stores it). None instead of the opened sandbox when another request opened
    one first (the row returned is then that one's, once it is open)."""
    # A row whose evidence ran out is not counted, so its sandbox must not run either: the
    # payer's expired sandboxes are shut down before their capacity goes to a new one, even
    # when no worker is there to reclaim them (docs/ARCHITECTURE.md §5). One the backend cannot confirm
    # closed refuses the open (503) rather than let more run than the limit.
    for stale in ledger.expired_rows_of_item_or_payer(item_id=item.pk, payer=item.payer):
        _shut_down(stale, reason=Reason.EXPIRED, strict=True)
    name = get_config().sandbox.backend
    if name == "http":
        pool.hosts_refresh()
    unreachable: list[str] = []
    while True:
        admission = before_sandbox_open(item=item, app=app, backend=name, excluding_hosts=unreachable)
        if not admission.opened_here:
            return (yield from _opened(admission.activity)), None
        activity = admission.activity
        try:
            opened = backend_of(activity).open(
                workspace_id=str(item.pk),
                spec=activity.size,
                workspace=item_workspace(item),
                disk_bytes=app.resources.disk_bytes,
            )
        except (SandboxUnavailable, OSError) as exc:
            ledger.activity_close(activity_id=activity.pk, reason=Reason.FAILED)
            error = unavailable_error(exc)
            # The host did not answer: it is marked so, and the sandbox goes to another, once.
            if isinstance(exc, SandboxHostUnreachable) and not unreachable and len(pool.pool_urls()) > 1:
                unreachable.append(activity.host)
                continue
            raise error from exc
        return activity, opened


def _attach(activity: SandboxActivity, opened: OpenedSandbox, *, lease: timedelta, used: bool = False) -> bool:
    """Stores the opened sandbox's id and size on its row with a fresh lease (in the caller's
    bookkeeping block); False if the row was closed while the sandbox opened."""
    return ledger.activity_attach(
        activity=activity, backend_sandbox_id=opened.id, size=opened.spec, lease=lease, used=used
    )


def _abandon_unattached(activity: SandboxActivity, opened: OpenedSandbox) -> None:
    """A sandbox whose id the ledger never stored (the write that would have failed): closed, and
    its row with it, so that the item's next command opens a new one instead of waiting for this
    one to finish opening. Whatever of it cannot be closed now, reconciliation closes."""
    try:
        backend_of(activity).close(opened.id)
        ledger.activity_close(activity_id=activity.pk, reason=Reason.FAILED)
    except Exception:
        logger.exception("could not close sandbox %s, whose opening exec failed", opened.id)


def _honour_close_while_opening(activity: SandboxActivity, opened: OpenedSandbox) -> None:
    # Closed while it was opening (a person pressed close): the sandbox goes too.
    backend_of(activity).close(opened.id)
    raise Conflict(error="sandbox_closed", detail="The sandbox was closed while it opened.")


def _opened(activity: SandboxActivity) -> Waiting[SandboxActivity]:
    """`activity` once the request opening its sandbox has stored its id (at most _OPENING_WAIT_SECONDS)."""
    deadline = time.monotonic() + _OPENING_WAIT_SECONDS
    while not activity.backend_sandbox_id:
        if time.monotonic() > deadline:
            raise Conflict(error="sandbox_opening", detail="The item's sandbox is still opening.")
        yield from pausing(0.05)
        current = SandboxActivity.current.filter(pk=activity.pk).first()
        if current is None:
            raise Conflict(error="sandbox_closed", detail="The sandbox closed while it opened.")
        activity = current
    return activity


def item_workspace(item: Item) -> Path:
    return item_workspace_root(item)


def sandbox_for_item(
    *, item: Item, app: AppDescriptor, live_row: ledger.LiveRowRead | None = None
) -> tuple[SandboxActivity, bool]:
    """The item's live sandbox, opened (through admission) when there is none."""
    return finished_here(sandbox_for_item_waiting(item=item, app=app, live_row=live_row))


def sandbox_for_item_waiting(
    *, item: Item, app: AppDescriptor, live_row: ledger.LiveRowRead | None = None
) -> Waiting[tuple[SandboxActivity, bool]]:
    ready = yield from live_sandbox_waiting(item=item, live_row=live_row)
    return ready if ready is not None else (yield from _opened_and_attached(item, app))


def sandbox_open_for_exec(*, item: Item, app: AppDescriptor) -> tuple[SandboxActivity, OpenedSandbox | None]:
    """Opens the item's sandbox through admission, for an exec that just found none live; if
    another request opened one since, admission hands that one over instead (and None). The
    sandbox this opens is not attached yet: the exec stores its id with its first write
    (`sandbox_exec_streaming`'s `unattached`), one transaction fewer."""
    return finished_here(_opening(item, app))


def sandbox_open_for_exec_waiting(
    *, item: Item, app: AppDescriptor
) -> Waiting[tuple[SandboxActivity, OpenedSandbox | None]]:
    """`sandbox_open_for_exec`, yielding its wait for another request's opening (collab.waits)."""
    return _opening(item, app)


def live_sandbox_waiting(
    *, item: Item, live_row: ledger.LiveRowRead | None = None
) -> Waiting[tuple[SandboxActivity, bool] | None]:
    """The item's live sandbox (waiting for one another request is opening), or None. `live_row` is
    its row as the request already read it with the item (`access.item_for_exec`); a row that
    stopped counting since is found out by the exec's heartbeat."""
    live = ledger.live_row_of_item(item.pk) if live_row is None else live_row.row
    if live is None:
        return None
    return ((yield from _opened(live)) if not live.backend_sandbox_id else live), False


# What a running exec reports: the sandbox it starts in, its output, its waits when it is driven
# from the event loop (collab.waits), the outcome last.
ExecEvent = ExecStarted | tuple[str, bytes] | Readable | ExecOutcome


def outcome_of(events: Iterator[ExecEvent]) -> ExecOutcome:
    """The outcome that ends an exec's events, run to their end in this thread."""
    outcome = None
    for event in waited_here(events):
        if isinstance(event, ExecOutcome):
            outcome = event
    if outcome is None:
        raise Unavailable(error="sandbox_host_unavailable", detail="The exec ended without a result.")
    return outcome


def sandbox_exec(
    *,
    item: Item,
    app: AppDescriptor,
    command: Command,
    timeout: float,
    exec_id: str = "",
    requested_by: str = "",
    ready: tuple[SandboxActivity, bool] | None = None,
    unattached: OpenedSandbox | None = None,
    slot: SlotHold | None = None,
) -> ExecOutcome:
    events = sandbox_exec_streaming(
        item=item,
        app=app,
        command=command,
        timeout=timeout,
        ready=ready,
        unattached=unattached,
        exec_id=exec_id,
        requested_by=requested_by,
        slot=slot,
    )
    return outcome_of(events)


def sandbox_exec_streaming(
    *,
    item: Item,
    app: AppDescriptor,
    command: Command,
    timeout: float,
    ready: tuple[SandboxActivity, bool] | None = None,
    unattached: OpenedSandbox | None = None,
    exec_id: str = "",
    requested_by: str = "",
    slot: SlotHold | None = None,
) -> Iterator[ExecEvent]:
    """Runs `command` in the item's sandbox: `ExecStarted` once it is recorded and about to start,
    its output chunks as they arrive, then the outcome (and, driven from the event loop, its
    waits: collab.waits).

    `ready` is the sandbox `sandbox_for_item` already opened (or found), so a caller can meet
    the quota gate (507) before it starts answering; without it the first step opens one.
    `unattached` is the sandbox `ready` names when `sandbox_open_for_exec` just opened it: the
    transaction that records the command stores its id too (409 if it was closed meanwhile). With
    an `exec_id` the command is recorded while it runs, so `requested_by` or staff can stop it.
    `slot` is the person's command slot (`SlotHold`), taken and given back in this exec's own
    transactions.
    """
    lease = get_config().sandbox.lease
    # The lease covers the whole command, so a long exec is not reclaimed as dead halfway.
    running_lease = lease + timedelta(seconds=timeout)
    opened_any = False
    announced = False
    replaced = ""
    for attempt in range(2):
        if ready and attempt == 0:
            activity, opened = ready
            if not activity.backend_sandbox_id and unattached is None:
                # Another request is opening it: its id comes once that one stores it.
                activity = yield from _opened(activity)
        else:
            activity, opened = yield from sandbox_for_item_waiting(item=item, app=app)
        opened_any = opened_any or opened
        attaching, closed_while_opening = unattached is not None and attempt == 0, False
        claiming = slot is not None and slot.claims_when_starting
        # The heartbeat and the command's record are one write (one commit): a crash after it
        # leaves a record that recovery finds exactly as before, and nothing half-written. A
        # refusal from the slot's `starting` (429) is caught by the caller: inside a caller's own
        # transaction this block is a savepoint, so the refusal leaves that transaction usable.
        try:
            with bookkeeping() as book:
                if attaching:
                    closed_while_opening = not _attach(activity, unattached, lease=running_lease, used=True)
                else:
                    # Read after the COMMIT: the record is written only while the row counts, so
                    # nothing waits for this answer, and on PostgreSQL the heartbeat, the slot's
                    # INSERT, the record and the COMMIT reach the server in one round trip.
                    beat = ledger.heartbeat_sent(activity_id=activity.pk, lease=running_lease, used=True)
                if claiming:
                    slot.starting()
                if not closed_while_opening:
                    with book.unread_until_commit():
                        running.exec_record(
                            exec_id=exec_id,
                            item=item,
                            requested_by=requested_by,
                            command=command,
                            activity=activity,
                            timeout=timeout,
                        )
            alive = not closed_while_opening if attaching else beat()
        except IntegrityError as exc:
            if attaching:
                _abandon_unattached(activity, unattached)
            # Only a transaction in which the slot was taken rolled back what it claimed; in a later
            # attempt's, the claim is committed already and the failure is just a failure.
            if claiming:
                raise StartConflict() from exc
            raise
        except BaseException:
            if attaching:
                _abandon_unattached(activity, unattached)
            raise
        if closed_while_opening:
            _honour_close_while_opening(activity, unattached)
        if not alive:
            # Its lease ran out (or it was closed) a moment ago: it no longer counts, so it stops.
            _shut_down(activity, reason=Reason.EXPIRED, strict=False)
            continue
        # The pool's hosts share the app's workspaces (workspace/sandboxes/share.py): the app sees them.
        _hold_growth(item, workspace_dir(item.pk))
        result: ExecResult | None = None
        try:
            if not announced:
                # The command is recorded (and its slot taken): it starts now, in this sandbox.
                announced = True
                yield ExecStarted(activity=activity, opened=opened_any, timeout=timeout, exec_id=exec_id)
            try:
                for event in backend_of(activity).exec_streaming(
                    activity.backend_sandbox_id, command=command, timeout=timeout, exec_id=exec_id
                ):
                    if isinstance(event, ExecResult):
                        result = event
                    else:
                        yield event
            except SandboxGone:
                # The backend lost it (host restart, its holder killed from inside): whatever of it
                # still runs is stopped, the row forgotten, and the command runs in a new one, once.
                logger.warning(
                    "sandbox %s of item %s stopped working; it is closed", activity.backend_sandbox_id, item.pk
                )
                running.exec_forget(exec_id)
                _shut_down(activity, reason=Reason.GONE, strict=False)
                replaced = _REPLACED_NOTE
                yield "stderr", replaced.encode()
                continue
            except SandboxHostUnreachable as exc:
                # The heartbeat written before the command claimed evidence the host never gave.
                ledger.evidence_withdrawn(activity_id=activity.pk, last_seen_at=activity.last_seen_at, lease=lease)
                raise unavailable_error(exc) from exc
            except SandboxUnavailable as exc:
                raise unavailable_error(exc) from exc
            if result is None:
                raise unavailable_error(SandboxUnavailable("the exec ended without a result"))
            result = running.explained(result, activity, stopped_by=running.exec_stopped_by(exec_id))
        except BaseException:
            # Failed, or the client went away (the generator closed): the record goes with the command.
            running.exec_forget(exec_id)
            raise
        note = None
        lives_on = result.reason != EndReason.SANDBOX_CLOSED
        # The record ends, the sandbox gets its fresh lease and the slot goes back in one commit
        # (on PostgreSQL in one round trip: nothing here reads a result).
        with bookkeeping(savepoint=False, unread=True):
            running.exec_forget(exec_id)
            # Its answer is not needed (a sandbox closed meanwhile is the closer's to end); read
            # after the COMMIT, so that it costs no round trip of its own.
            beat = ledger.heartbeat_sent(activity_id=activity.pk, lease=lease, used=True) if lives_on else None
            if slot is not None:
                slot.ended()
        if beat is not None:
            beat()
        if lives_on:
            note = _stopped_after_exec(item, app, activity)
        told = f"\n[{result.reason_detail}]\n" if result.reason_detail else ""
        if note or told:
            yield "stderr", ((note or "") + told).encode()
        result = replace(result, stderr=replaced + result.stderr + (note or "") + told)
        yield ExecOutcome(result=result, activity=activity, opened=opened_any, closed=note is not None, exec_id=exec_id)
        return
    raise Unavailable(error="sandbox_host_unavailable", detail="The sandbox vanished twice in a row.")


class StartConflict(Exception):
    """The transaction that starts a command broke a unique key (the slot's `starting` claimed
    what another request holds): nothing of it was kept, and the command did not run."""


class SlotHold(Protocol):
    """What a command holds for the person while it runs (`collab.slots.SlotForCommand`): taken in
    the transaction that records the command when `claims_when_starting` (one commit, not two; what
    `starting` raises refuses the command with nothing stored, and a key that transaction breaks is
    StartConflict), given back in the one that ends the record."""

    @property
    def claims_when_starting(self) -> bool: ...

    def starting(self) -> None: ...

    def ended(self) -> None: ...


def _stopped_after_exec(item: Item, app: AppDescriptor, activity: SandboxActivity) -> str | None:
    """Stops a sandbox the command broke (local) or that passed its disk limit; returns what the
    reply says about it, or None when it runs on."""
    if activity.backend == "local" and not backend_at("local").probe(activity.backend_sandbox_id):
        # Its namespace holder died (`kill -9 2` from inside): every later exec would fail.
        logger.warning("sandbox %s of item %s lost its holder; it is closed", activity.backend_sandbox_id, item.pk)
        _shut_down(activity, reason=Reason.GONE, strict=False)
        return _BROKEN_NOTE
    return _account_disk(item, app, activity)


def _hold_growth(item: Item, directory: Path, used: int | None = None) -> None:
    """On an image, the kernel holds sandbox code to what its payer's per-user disk total has left
    (the ballast); `used` is the workspace's size when the caller just measured it."""
    if not volumes.is_bounded(directory):
        return
    size = volumes.used_bytes(directory) if used is None else used
    headroom = payer_disk_headroom(payer=item.payer, item_id=str(item.pk), item_bytes=size)
    volumes.ballast_set(directory, None if headroom is None else max(0, headroom))


def _account_disk(item: Item, app: AppDescriptor, activity: SandboxActivity) -> str | None:
    """After an exec: the disk ledger learns what the command wrote (when the payer has a disk
    limit) and an image's ballast is sized anew. A workspace the kernel does not bound is stopped
    once it passes its app's limit, or when it grew while its payer is over the per-user total.
    Returns the reply's note when it stopped the sandbox.
    """
    directory = workspace_dir(item.pk)
    limit = app.resources.disk_bytes or 0
    payer = item.payer
    tracked = limits_for(payer).disk is not None
    bounded = volumes.is_bounded(directory)
    if not tracked and (bounded or not limit):
        return None
    used = volumes.used_bytes(directory) if bounded else workspace_bytes(directory)
    before = 0
    if tracked:
        before = getattr(ledger.disk_usage_of_item(item.pk), "bytes", 0)
        ledger.record_disk_measurements(
            [ledger.DiskMeasurement(item_id=str(item.pk), app_slug=item.app_slug, payer=payer, bytes=used)]
        )
    if bounded:
        _hold_growth(item, directory, used)
        return None
    if limit and used > limit:
        logger.warning("item %s wrote %d bytes past its %d byte limit; its sandbox is stopped", item.pk, used, limit)
        _shut_down(activity, reason=Reason.DISK, strict=False)
        return _DISK_STOP_NOTE
    headroom = payer_disk_headroom(payer=payer, item_id=str(item.pk), item_bytes=used) if used > before else None
    if headroom is not None and headroom < 0:
        logger.warning(
            "item %s grew while %s is over their per-user disk total; its sandbox is stopped", item.pk, payer
        )
        _shut_down(activity, reason=Reason.DISK, strict=False)
        return _USER_DISK_STOP_NOTE
    return None


def sandboxes_hold_to_disk_totals(measurements: list[ledger.DiskMeasurement], *, before: dict[str, int]) -> int:
    """After a sweep: each image of a payer with a per-user disk total gets a ballast sized to what
    the total has left, and where workspaces are only measured, a sandbox whose workspace grew
    (since `before`, the previous measurements) while its payer is over the total is stopped, so
    a background writer does not go on. Returns how many sandboxes it stopped."""
    totals: dict[str, int] = {}
    for measurement in measurements:
        totals[measurement.payer] = totals.get(measurement.payer, 0) + measurement.bytes
    limits = limits_for_many(totals)
    stopped = 0
    for measurement in measurements:
        limit = limits[measurement.payer].disk
        if limit is None:
            continue
        headroom = limit - totals[measurement.payer]
        directory = workspace_dir(measurement.item_id)
        if volumes.is_bounded(directory):
            volumes.ballast_set(directory, max(0, headroom))
        elif headroom < 0 and measurement.bytes > before.get(measurement.item_id, 0):
            for activity in ledger.open_rows_of_item(measurement.item_id):
                logger.warning(
                    "item %s grew while its payer is over their disk total; its sandbox is stopped", measurement.item_id
                )
                stopped += _shut_down(activity, reason=Reason.DISK, strict=False)
    return stopped


class RunsIn(OnBackend, Protocol):
    backend_sandbox_id: str


def command_stop(*, sandbox: RunsIn, exec_id: str) -> bool:
    """Stops one running command of `sandbox` (not the sandbox); False when it no longer runs."""
    try:
        return backend_of(sandbox).stop(sandbox.backend_sandbox_id, exec_id)
    except SandboxUnavailable as exc:
        raise unavailable_error(exc) from exc


def sandbox_close(*, item: Item, closed_by: str = "") -> int:
    """Truly shuts the item's sandbox down, then forgets it; returns how many were closed. A
    command it cuts off says `closed_by` closed it (blank: the service did, deleting the item)."""
    rows = list(ledger.open_rows_of_item(item.pk))
    for activity in rows:
        _shut_down(activity, reason=Reason.CLOSED, strict=True, closed_by=closed_by)
    return len(rows)


def host_sandboxes_close(*, host: str, closed_by: str) -> int:
    """Closes every sandbox the ledger holds open on the sandbox host `host` (an operator retiring or
    draining it); a sandbox the host cannot be asked to stop is forgotten all the same, and
    reconciliation closes it if the host comes back. Returns how many rows it closed."""
    closed = 0
    for activity in SandboxActivity.current.filter(backend="http", host=host).order_by("id"):
        closed += _shut_down(activity, reason=Reason.CLOSED, strict=False, closed_by=closed_by)
    return closed


def sandboxes_probe() -> SweepCounts:
    """Fresh evidence for every open sandbox; the dead are forgotten, the unreachable left to expire."""
    lease = get_config().sandbox.lease
    probed = refreshed = closed = 0
    pool.hosts_refresh(older_than=timedelta(0))
    # A host that does not answer is not asked about each of its sandboxes: they are left to expire.
    silent = {state.url for state in pool.pool_state() if not state.answers}
    for activity in SandboxActivity.current.exclude(backend_sandbox_id="").exclude(host__in=silent).order_by("id"):
        probed += 1
        try:
            alive = backend_of(activity).probe(activity.backend_sandbox_id)
        except SandboxUnavailable:
            continue
        if alive:
            refreshed += ledger.heartbeat(activity_id=activity.pk, lease=lease)
        else:
            # What is left of it (a broken sandbox's other processes) is stopped before it is forgotten.
            logger.warning(
                "sandbox %s of item %s stopped working; it is closed", activity.backend_sandbox_id, activity.item_id
            )
            closed += _shut_down(activity, reason=Reason.GONE, strict=False)
    return SweepCounts(probed=probed, refreshed=refreshed, closed=closed)


def sandboxes_reconcile(*, older_than: timedelta = RECONCILE_GRACE) -> SweepCounts:
    """Closes every sandbox a backend runs that the ledger does not hold open.

    Such sandboxes are nobody's capacity, so they must not run: a sandbox host that answered
    after the app gave up, a process that died between opening and recording, a row forgotten
    by hand. Ones younger than `older_than` may still be on their way into the ledger.
    """
    closed = 0
    for name, host in _backends_in_use():
        backend = backend_at(name, host)
        try:
            running = backend.sandboxes_older_than(older_than.total_seconds())
        except SandboxUnavailable as exc:
            logger.warning("could not list the sandboxes of the %s backend %s: %s", name, host, exc)
            continue
        known = ledger.open_backend_ids(name, host=host)
        for sandbox_id in running:
            if sandbox_id not in known:
                logger.warning("closing %s sandbox %s %s: the ledger does not know it", name, host, sandbox_id)
                backend.close(sandbox_id)
                closed += 1
    return SweepCounts(closed=closed)


def _backends_in_use() -> list[tuple[str, str]]:
    """(backend, host) of the configured backend (each host of a pool), plus any other that rows
    still name."""
    sandbox = get_config().sandbox
    configured = {("http", host) for host in sandbox.hosts} if sandbox.backend == "http" else {(sandbox.backend, "")}
    named = set(SandboxActivity.current.values_list("backend", "host").distinct())
    # An http row from before pools names no host: it is on the first configured one.
    first = next(iter(sandbox.hosts), "")
    return sorted({(name, host or first if name == "http" else host) for name, host in named} | configured)


def sandboxes_reclaim(*, idle_for: timedelta | None = None) -> SweepCounts:
    """Idle reclaim (unused for `idle_reclaim`) and clean-up of rows whose evidence expired."""
    idle_for = idle_for or get_config().sandbox.idle_reclaim
    closed = 0
    for activity in ledger.idle_rows(idle_since=clock.now() - idle_for):
        _shut_down(activity, reason=Reason.IDLE, strict=False)
        closed += 1
    for activity in ledger.expired_rows():
        _shut_down(activity, reason=Reason.EXPIRED, strict=False)
        closed += 1
    return SweepCounts(closed=closed)

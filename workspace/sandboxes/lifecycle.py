"""Opening, using, probing and closing item sandboxes, with the ledger kept in step.

These run backend calls (processes, HTTP) and so are not one database transaction: each ledger
step is its own short write, and the order is chosen so a failure leaves nothing counted that is
not really there.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from collab import clock
from collab.errors import ApiError
from quotas import ledger
from quotas.models import SandboxActivity
from workspace.config import AppDescriptor, get_config
from workspace.filestore import workspace_dir
from workspace.models import Item
from workspace.sandboxes.admission import before_sandbox_open
from workspace.sandboxes.base import Command, ExecResult, SandboxGone, SandboxSpec, SandboxUnavailable
from workspace.sandboxes.registry import backend_named, default_backend

logger = logging.getLogger(__name__)
Reason = SandboxActivity.CloseReason
# How long a request waits for a sandbox another request is opening for the same item.
_OPENING_WAIT_SECONDS = 20.0


@dataclass(frozen=True)
class ExecOutcome:
    result: ExecResult
    activity: SandboxActivity
    opened: bool


@dataclass(frozen=True)
class SweepCounts:
    probed: int = 0
    refreshed: int = 0
    closed: int = 0


def _unavailable(exc: Exception) -> ApiError:
    return ApiError(
        status_code=503,
        error="sandbox_host_unavailable",
        detail=f"The sandbox backend cannot be reached, so nothing ran: {exc}",
    )


def _shut_down(activity: SandboxActivity, *, reason: str, strict: bool) -> None:
    """Stops the processes, then forgets the row; `strict` refuses to forget what it could not stop."""
    if activity.backend_sandbox_id:
        try:
            backend_named(activity.backend).close(activity.backend_sandbox_id)
        except SandboxUnavailable as exc:
            if strict:
                raise _unavailable(exc) from exc
            logger.warning("could not reach the backend to close %s: %s", activity, exc)
    ledger.activity_close(activity_id=activity.pk, reason=reason)


def _open(item: Item, app: AppDescriptor) -> tuple[SandboxActivity, bool]:
    # A row whose evidence ran out is not counted; shut it down before a replacement opens.
    for stale in ledger.open_rows_of_item(item.pk).filter(lease_expires_at__lte=clock.now()):
        _shut_down(stale, reason=Reason.EXPIRED, strict=False)
    backend = default_backend()
    admission = before_sandbox_open(item=item, app=app, backend=backend.name)
    if not admission.opened_here:
        return _await_opened(admission.activity), False
    activity = admission.activity
    requested = SandboxSpec(activity.cpu_cores, activity.memory_bytes, activity.pids_max)
    try:
        opened = backend.open(item_id=str(item.pk), spec=requested, workspace=item_workspace(item))
    except (SandboxUnavailable, OSError) as exc:
        ledger.activity_close(activity_id=activity.pk, reason=Reason.FAILED)
        raise _unavailable(exc) from exc
    size = ledger.ResolvedSize(opened.spec.cpu_cores, opened.spec.memory_bytes, opened.spec.pids_max)
    attached = ledger.activity_attach(
        activity_id=activity.pk, backend_sandbox_id=opened.id, size=size, lease=get_config().sandbox.lease
    )
    if not attached:
        # Closed while it was opening (a person pressed close): honour the close.
        backend.close(opened.id)
        raise ApiError(status_code=409, error="sandbox_closed", detail="The sandbox was closed while it opened.")
    activity.refresh_from_db()
    return activity, True


def _await_opened(activity: SandboxActivity) -> SandboxActivity:
    deadline = time.monotonic() + _OPENING_WAIT_SECONDS
    while not activity.backend_sandbox_id:
        if time.monotonic() > deadline:
            raise ApiError(status_code=409, error="sandbox_opening", detail="The item's sandbox is still opening.")
        time.sleep(0.05)
        current = SandboxActivity.current.filter(pk=activity.pk).first()
        if current is None:
            raise ApiError(status_code=409, error="sandbox_closed", detail="The sandbox closed while it opened.")
        activity = current
    return activity


def item_workspace(item: Item) -> Path:
    return workspace_dir(item.pk)


def sandbox_for_item(*, item: Item, app: AppDescriptor) -> tuple[SandboxActivity, bool]:
    """The item's live sandbox, opened (through admission) when there is none."""
    live = ledger.live_row_of_item(item.pk)
    if live is not None:
        return (_await_opened(live) if not live.backend_sandbox_id else live), False
    return _open(item, app)


def sandbox_exec(*, item: Item, app: AppDescriptor, command: Command, timeout: float) -> ExecOutcome:
    lease = get_config().sandbox.lease
    opened_any = False
    for _attempt in range(2):
        activity, opened = sandbox_for_item(item=item, app=app)
        opened_any = opened_any or opened
        ledger.heartbeat(activity_id=activity.pk, lease=lease, used=True)
        try:
            result = backend_named(activity.backend).exec(activity.backend_sandbox_id, command=command, timeout=timeout)
        except SandboxGone:
            # The backend lost it (host restart, manual cleanup): forget it and open a new one once.
            ledger.activity_close(activity_id=activity.pk, reason=Reason.GONE)
            continue
        except SandboxUnavailable as exc:
            raise _unavailable(exc) from exc
        ledger.heartbeat(activity_id=activity.pk, lease=lease, used=True)
        return ExecOutcome(result=result, activity=activity, opened=opened_any)
    raise ApiError(status_code=503, error="sandbox_host_unavailable", detail="The sandbox vanished twice in a row.")


def sandbox_close(*, item: Item) -> int:
    """Truly shuts the item's sandbox down, then forgets it; returns how many were closed."""
    rows = list(ledger.open_rows_of_item(item.pk))
    for activity in rows:
        _shut_down(activity, reason=Reason.CLOSED, strict=True)
    return len(rows)


def sandboxes_probe() -> SweepCounts:
    """Fresh evidence for every open sandbox; the dead are forgotten, the unreachable left to expire."""
    lease = get_config().sandbox.lease
    probed = refreshed = closed = 0
    for activity in SandboxActivity.current.exclude(backend_sandbox_id="").order_by("id"):
        probed += 1
        try:
            alive = backend_named(activity.backend).probe(activity.backend_sandbox_id)
        except SandboxUnavailable:
            continue
        if alive:
            refreshed += ledger.heartbeat(activity_id=activity.pk, lease=lease)
        else:
            closed += ledger.activity_close(activity_id=activity.pk, reason=Reason.GONE)
    return SweepCounts(probed=probed, refreshed=refreshed, closed=closed)


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

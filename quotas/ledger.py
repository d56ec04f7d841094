"""The liveness and disk ledgers: open, heartbeat and close sandbox rows; record disk figures.

Liveness is evidence, never a counter (spec "States and transitions", rule 1): a row is live
while it is not soft-deleted and its lease has not run out. Every update and read filters
`is_deleted`, so a late heartbeat cannot bring a closed sandbox back (docs/ARCHITECTURE.md §5).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Count, Q, QuerySet, Sum

from collab import clock
from collab.rows import ModelRows, PlannedStatement, answer_later
from quotas.limits import limits_for_many
from quotas.models import SandboxActivity, WorkspaceDiskUsage
from quotas.values import SandboxSize


@dataclass(frozen=True)
class DiskMeasurement:
    item_id: str
    app_slug: str
    payer: str
    bytes: int


def live_rows(*, at: datetime | None = None) -> QuerySet[SandboxActivity]:
    """Rows whose evidence is current at `at` (now by default)."""
    return SandboxActivity.current.filter(lease_expires_at__gt=at or clock.now())


def live_rows_of_payer(payer: str, *, at: datetime | None = None) -> QuerySet[SandboxActivity]:
    return live_rows(at=at).filter(owner=payer)


# Every exec reads its item's live row and writes the row's heartbeat twice, so these are written
# as SQL, like the gate's aggregates (quotas/selectors.py): building the ORM's query took longer
# than running the indexed statement (bench/exec.py). tests/quotas/test_ledger_sql.py holds them
# to the ORM's answer. Writes answer by RETURNING, which a pipelined transaction gives to a reader.
_ACTIVITY = SandboxActivity._meta.db_table
ACTIVITY_ROWS = ModelRows(SandboxActivity)
# The id of an item's newest live row (on `sbx_item_live_idx`), with `live_row_params`; a statement
# that reads the item's row together with something else (an exec's item) joins on it.
LIVE_ROW_ID_OF_ITEM = (
    f"SELECT id FROM {_ACTIVITY} WHERE item_id = %s AND is_deleted = %s AND lease_expires_at > %s "
    "ORDER BY opened_at DESC, id DESC LIMIT 1"
)
# Whether a row counts now: a statement in the same transaction as the row's heartbeat asks this
# instead of waiting for the heartbeat's answer (with `live_row_exists_params`).
LIVE_ROW_EXISTS = f"EXISTS (SELECT 1 FROM {_ACTIVITY} WHERE id = %s AND is_deleted = %s AND lease_expires_at > %s)"
_LIVE_ROW_OF_ITEM = PlannedStatement(
    "quotas_live_row_of_item",
    f"SELECT {ACTIVITY_ROWS.columns(_ACTIVITY)} FROM {_ACTIVITY} WHERE id = ({LIVE_ROW_ID_OF_ITEM})",
)
_HEARTBEAT = (
    f"UPDATE {_ACTIVITY} SET last_seen_at = %s, lease_expires_at = %s{{used}} "
    "WHERE id = %s AND is_deleted = %s AND lease_expires_at > %s RETURNING id"
)
# Every column but the id, in the model's order (`activity_open_sent` gives a value for each).
_OPEN_COLUMNS = [field.column for field in SandboxActivity._meta.concrete_fields if not field.primary_key]
_OPEN = PlannedStatement(
    "quotas_activity_open",
    f"INSERT INTO {_ACTIVITY} ({', '.join(_OPEN_COLUMNS)}) VALUES ({', '.join(['%s'] * len(_OPEN_COLUMNS))}) "
    f"RETURNING {ACTIVITY_ROWS.columns()}",
)
_HEARTBEAT_SEEN = PlannedStatement("quotas_heartbeat_seen", _HEARTBEAT.format(used=""))
_HEARTBEAT_USED = PlannedStatement("quotas_heartbeat_used", _HEARTBEAT.format(used=", last_used_at = %s"))


@dataclass(frozen=True)
class LiveRowRead:
    """An item's live row as a statement that read more than it found it: None when it had none."""

    row: SandboxActivity | None


def live_row_params(item_id: str | int) -> list[object]:
    """The parameters of `LIVE_ROW_ID_OF_ITEM` for the item, live now."""
    return [str(item_id), False, connection.ops.adapt_datetimefield_value(clock.now())]


def live_row_exists_params(activity_id: int) -> list[object]:
    """The parameters of `LIVE_ROW_EXISTS` for the row, live now."""
    return [activity_id, False, connection.ops.adapt_datetimefield_value(clock.now())]


def live_row_of_item(item_id: str | int) -> SandboxActivity | None:
    """The item's newest row of `live_rows`."""
    return live_row_of_item_sent(item_id)()


def live_row_of_item_sent(item_id: str | int) -> Callable[[], SandboxActivity | None]:
    """`live_row_of_item`, read when the function it returns is called (in a PostgreSQL pipelined
    transaction, the statement goes to the server with the statements sent after it)."""
    row = answer_later(_LIVE_ROW_OF_ITEM, live_row_params(item_id), connection=connection)
    return lambda: ACTIVITY_ROWS.instance_if_any(row() or [None] * ACTIVITY_ROWS.width, connection=connection)


def open_rows_of_item(item_id: str | int) -> QuerySet[SandboxActivity]:
    """Not closed yet, live or not: what must be shut down before a replacement opens."""
    return SandboxActivity.current.filter(item_id=str(item_id))


def activity_open_sent(
    *,
    item_id: str | int,
    app_slug: str,
    payer: str,
    backend: str,
    size: SandboxSize,
    lease: timedelta,
    host: str = "",
) -> Callable[[], SandboxActivity]:
    """Records a sandbox that is about to open, at its app's resolved size; it counts from now on.
    The row is read when the function it returns is called: in a PostgreSQL pipelined
    transaction the INSERT then reaches the server with the COMMIT after it, in one round trip.

    Callers run this inside their admission transaction so the check and the new row are one
    step (docs/ARCHITECTURE.md §8). Its cpu and memory count towards per-user totals when the
    size declares a cost. tests/quotas/test_ledger_sql.py holds its row to the ORM's `create`."""
    now = clock.now()
    moment, expires = (connection.ops.adapt_datetimefield_value(value) for value in (now, now + lease))
    values = {
        "item_id": str(item_id),
        "app_slug": app_slug,
        "owner": payer,
        "backend": backend,
        "host": host,
        "backend_sandbox_id": "",
        "cpu_cores": size.cpu_cores,
        "memory_bytes": size.memory_bytes,
        "pids_max": size.pids_max,
        "charges_cost": size.declares_cost,
        "opened_at": moment,
        "last_seen_at": moment,
        "last_used_at": moment,
        "lease_expires_at": expires,
        "is_deleted": False,
        "closed_at": None,
        "close_reason": "",
        "closed_by": "",
    }
    row = answer_later(_OPEN, [values[column] for column in _OPEN_COLUMNS], connection=connection)
    return lambda: ACTIVITY_ROWS.instance(row(), connection=connection)


OPENING_LEASE = timedelta(seconds=30)


def opening_lease(lease: timedelta) -> timedelta:
    """How long a row counts before its backend confirms the sandbox: a crash while opening
    then holds the payer's capacity for seconds, not for a whole lease."""
    return min(lease, OPENING_LEASE)


def activity_attach(
    *, activity: SandboxActivity, backend_sandbox_id: str, size: SandboxSize, lease: timedelta, used: bool = False
) -> bool:
    """Stores the backend's id and the size it actually enforces, and starts the full lease (and,
    when `used`, records exec activity as `heartbeat` does); the same values land on `activity`,
    so the caller holds the row as stored without reading it back.

    False if the row was closed meanwhile, or is being closed (`activity_closing`: the close may
    have read the row before this, and would not know the id); `activity` is then left as it was.
    """
    moment = clock.now()
    changes = {
        "backend_sandbox_id": backend_sandbox_id,
        "cpu_cores": size.cpu_cores,
        "memory_bytes": size.memory_bytes,
        "pids_max": size.pids_max,
        "last_seen_at": moment,
        "lease_expires_at": moment + lease,
    }
    if used:
        changes["last_used_at"] = moment
    adapt = connection.ops.adapt_datetimefield_value
    stored = {name: adapt(value) if isinstance(value, datetime) else value for name, value in changes.items()}
    assignments = ", ".join(f"{name} = %s" for name in stored)
    # RETURNING rather than the row count: in an exec's pipelined bookkeeping only a reader waits.
    attached = answer_later(
        f"UPDATE {_ACTIVITY} SET {assignments} WHERE id = %s AND is_deleted = %s AND close_reason = %s RETURNING id",
        [*stored.values(), activity.pk, False, ""],
        connection=connection,
    )
    if attached() is None:
        return False
    for field, value in changes.items():
        setattr(activity, field, value)
    return True


def heartbeat(*, activity_id: int, lease: timedelta, used: bool = False) -> bool:
    """Fresh evidence (a probe, or exec activity when `used`); False if the ledger gave up on it.

    The UPDATE only matches rows still open AND still live: a heartbeat that arrives after a
    close, a reclaim or the end of the lease changes nothing, so a row that stopped counting
    never counts again (its capacity may already be someone else's); it is closed instead.
    """
    return heartbeat_sent(activity_id=activity_id, lease=lease, used=used)()


def heartbeat_sent(*, activity_id: int, lease: timedelta, used: bool = False) -> Callable[[], bool]:
    """`heartbeat`, its answer read when the function it returns is called: in a PostgreSQL
    pipelined transaction (an exec's bookkeeping) the UPDATE then reaches the server together
    with the next statement whose result is read, in one round trip."""
    adapt = connection.ops.adapt_datetimefield_value
    moment = clock.now()
    now, expires = adapt(moment), adapt(moment + lease)
    changes = [now, expires, now] if used else [now, expires]
    # RETURNING rather than the row count: in a pipelined transaction only a reader waits for the result.
    row = answer_later(
        _HEARTBEAT_USED if used else _HEARTBEAT_SEEN, [*changes, activity_id, False, now], connection=connection
    )
    return lambda: row() is not None


def activity_closing(*, activity_id: int, reason: str, closed_by: str) -> None:
    """Says why and by whom an open row is about to be closed, before its processes are killed
    (blank both: the close failed and the row runs on). It still counts until `activity_close`."""
    SandboxActivity.current.filter(pk=activity_id).update(close_reason=reason, closed_by=closed_by)


def activity_close(*, activity_id: int, reason: str, closed_by: str = "") -> bool:
    """Soft-deletes the row (reclaim is forgetting); False if it was already closed."""
    moment = clock.now()
    updated = SandboxActivity.current.filter(pk=activity_id).update(
        is_deleted=True, closed_at=moment, close_reason=reason, closed_by=closed_by
    )
    return updated == 1


def evidence_withdrawn(*, activity_id: int, last_seen_at: datetime, lease: timedelta) -> None:
    """The heartbeat an exec wrote before its sandbox's host turned out not to answer is taken
    back: the row counts until `last_seen_at` (the last real evidence) plus the lease, so retrying
    a dead host does not keep its sandboxes billed."""
    SandboxActivity.current.filter(pk=activity_id).update(
        last_seen_at=last_seen_at, lease_expires_at=last_seen_at + lease
    )


def live_usage_by_host(hosts: Iterable[str]) -> dict[str, HostUsage]:
    """What the ledger counts live on each of `hosts` (one grouped query): sizes as recorded, and
    how many rows leave cpu or memory to the host's default (None or 0), which the caller prices."""
    undeclared_cpu = Q(cpu_cores__isnull=True) | Q(cpu_cores=0)
    undeclared_memory = Q(memory_bytes__isnull=True) | Q(memory_bytes=0)
    rows = (
        live_rows()
        .filter(backend="http", host__in=list(hosts))
        .values("host")
        .annotate(
            declared_cpu=Sum("cpu_cores", filter=~undeclared_cpu, default=0.0),
            declared_memory=Sum("memory_bytes", filter=~undeclared_memory, default=0),
            count=Count("id"),
            default_cpu=Count("id", filter=undeclared_cpu),
            default_memory=Count("id", filter=undeclared_memory),
        )
        .order_by()
    )
    return {
        row["host"]: HostUsage(
            cpu_cores=float(row["declared_cpu"]),
            memory_bytes=int(row["declared_memory"]),
            sandboxes=row["count"],
            default_cpu=row["default_cpu"],
            default_memory=row["default_memory"],
        )
        for row in rows
    }


@dataclass(frozen=True)
class HostUsage:
    """What the ledger counts live on one sandbox host (`live_usage_by_host`)."""

    cpu_cores: float = 0.0
    memory_bytes: int = 0
    sandboxes: int = 0
    default_cpu: int = 0  # rows whose cpu is the host's default
    default_memory: int = 0  # rows whose memory is the host's default


def idle_rows(*, idle_since: datetime) -> QuerySet[SandboxActivity]:
    """Open rows not used since `idle_since`: the idle reclaim's candidates."""
    return SandboxActivity.current.filter(last_used_at__lt=idle_since).order_by("last_used_at", "id")


def expired_rows(*, at: datetime | None = None) -> QuerySet[SandboxActivity]:
    """Open rows whose evidence ran out: no longer counted, still to be shut down and forgotten."""
    return SandboxActivity.current.filter(lease_expires_at__lte=at or clock.now()).order_by("id")


def expired_rows_of_item_or_payer(*, item_id: str | int, payer: str) -> QuerySet[SandboxActivity]:
    """What must be shut down before the item opens a sandbox for `payer`: the item's rows and
    the payer's whose evidence ran out (one query)."""
    return expired_rows().filter(Q(item_id=str(item_id)) | Q(owner=payer))


def open_backend_ids(backend: str, *, host: str = "") -> set[str]:
    """The backend sandbox ids the ledger still holds open (live or not yet shut down) on `host`."""
    return set(
        SandboxActivity.current.filter(backend=backend, host=host)
        .exclude(backend_sandbox_id="")
        .values_list("backend_sandbox_id", flat=True)
    )


@transaction.atomic
def payers_with_disk_limit(payers: Iterable[str]) -> set[str]:
    """Who among `payers` has a per-user disk limit: only their workspaces need measuring."""
    return {payer for payer, limits in limits_for_many(payers).items() if limits.disk is not None}


def record_disk_measurements(measurements: Iterable[DiskMeasurement]) -> int:
    """The disk ledger's one entry point, fed after each mirror sweep (spec "Events" 4).

    Writes only the figures of payers who have a per-user disk limit (spec "Limits" 11): with
    no disk quota anywhere a sweep writes nothing. An item whose payer has no limit (any more)
    has its old row forgotten, so a former payer is not charged for it. Returns rows written.
    """
    measurements = list(measurements)
    limits = limits_for_many(m.payer for m in measurements)
    moment = clock.now()
    written = 0
    untracked: list[str] = []
    for measurement in measurements:
        if limits[measurement.payer].disk is None:
            untracked.append(str(measurement.item_id))
            continue
        WorkspaceDiskUsage.objects.update_or_create(
            item_id=str(measurement.item_id),
            defaults={
                "app_slug": measurement.app_slug,
                "owner": measurement.payer,
                "bytes": measurement.bytes,
                "measured_at": moment,
                "is_deleted": False,
            },
        )
        written += 1
    if untracked and WorkspaceDiskUsage.current.exists():
        for start in range(0, len(untracked), 500):
            WorkspaceDiskUsage.current.filter(item_id__in=untracked[start : start + 500]).update(is_deleted=True)
    return written


def disk_usage_forget(item_ids: Iterable[str | int]) -> int:
    """Items that are gone stop counting towards their payers' disk (soft delete, like every row)."""
    return WorkspaceDiskUsage.current.filter(item_id__in=[str(item_id) for item_id in item_ids]).update(is_deleted=True)


def disk_bytes_by_item() -> dict[str, int]:
    """Every item's last measurement (rows exist only for payers with a disk limit), read before a
    sweep records new ones so it can tell which workspaces grew."""
    return dict(WorkspaceDiskUsage.current.values_list("item_id", "bytes"))


def disk_usage_of_item(item_id: str | int) -> WorkspaceDiskUsage | None:
    return WorkspaceDiskUsage.current.filter(item_id=str(item_id)).first()

"""Commands as they run: recorded while they run for a person, so another request (another
process, even) can list them and stop one without closing the sandbox, and explained when they
end: who stopped one, who or what closed its sandbox under it (docs/ARCHITECTURE.md §5)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from django.db import connection

from collab import clock
from collab.rows import PlannedStatement, execute
from quotas import ledger
from quotas.models import SandboxActivity
from workspace.items.models import Item, RunningExec
from workspace.sandboxes.base import Command, EndReason, ExecResult

Reason = SandboxActivity.CloseReason
# What a command cut off by its sandbox's closing is told, by the reason the ledger recorded.
_CLOSED_UNDER_IT = {
    Reason.CLOSED: "Its sandbox was closed while it ran.",
    Reason.IDLE: "Its sandbox was closed as idle while it ran.",
    Reason.EXPIRED: "Its sandbox's liveness ran out while it ran, so the sandbox was closed.",
    Reason.GONE: "Its sandbox stopped working while it ran and was closed.",
    Reason.DISK: "Its sandbox was stopped while it ran: the workspace went over its disk limit.",
}
# Who stopped a command its server stopped as it shut down: no user id has a space or parentheses.
SERVER_SHUTDOWN = "(server shutdown)"
_SHUTDOWN_DETAIL = "The server it ran on was shutting down, so it was stopped before it finished. Run it again."
# A row outlives its command's time limit by this much before it counts as left by a dead process.
_MARGIN = timedelta(seconds=60)
# Every exec for a person writes and deletes its record, so both are written as SQL: building the
# ORM's statement (and a delete's collector) took longer than running it (bench/exec.py).
# tests/items/test_exec_sql.py holds them to the ORM's answer.
_RUNNING = RunningExec._meta.db_table
# Written only while the sandbox's row counts: in the transaction of its heartbeat, the record
# then need not wait for the heartbeat's answer (on PostgreSQL the COMMIT goes with them).
_RECORD = PlannedStatement(
    "items_exec_record",
    f"INSERT INTO {_RUNNING} (exec_id, item_id, requested_by, command, backend, host, backend_sandbox_id, "
    f"started_at, ends_by, stopped_by) SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, %s WHERE {ledger.LIVE_ROW_EXISTS}",
)
_FORGET = PlannedStatement("items_exec_forget", f"DELETE FROM {_RUNNING} WHERE exec_id = %s")


def new_exec_id() -> str:
    return uuid.uuid4().hex


def is_exec_id(text: str) -> bool:
    """Whether `text` has the form `new_exec_id` gives (32 lower-case hex digits): anything else
    names no command, and is answered so before any database sees it (a NUL was a 400 on
    PostgreSQL and a 404 on SQLite)."""
    return len(text) == 32 and all(character in "0123456789abcdef" for character in text)


def exec_record(
    *, exec_id: str, item: Item, requested_by: str, command: Command, activity: SandboxActivity, timeout: float
) -> None:
    """Records the command before it runs in `activity`'s sandbox, so it can be listed and
    stopped; `exec_forget` ends the record. The caller writes it in the same transaction as the
    sandbox's heartbeat (one commit); nothing is written when the sandbox's row no longer counts
    (the heartbeat found it expired or closed). Without an `exec_id` (agent turns, workflow runs) nothing
    is recorded and nobody can stop it but its time limit."""
    if not exec_id:
        return
    moment = clock.now()
    shown = command if isinstance(command, str) else " ".join(command)
    # One insert and one delete per command; a second attempt (the first sandbox broke) is
    # recorded anew, in the new sandbox, after the first record went. A record a crash leaves
    # behind stops counting at `ends_by`.
    adapt = connection.ops.adapt_datetimefield_value
    ends_by = moment + timedelta(seconds=timeout) + _MARGIN
    execute(
        connection,
        _RECORD,
        [
            exec_id,
            item.pk,
            requested_by,
            shown[:200],
            activity.backend,
            activity.host,
            activity.backend_sandbox_id,
            adapt(moment),
            adapt(ends_by),
            "",
            *ledger.live_row_exists_params(activity.pk),
        ],
    )


def exec_stopped_by(exec_id: str) -> Callable[[], str]:
    """A reader of who stopped the recorded command (blank: nobody), to ask before the record goes."""
    if not exec_id:
        return lambda: ""
    return lambda: RunningExec.objects.filter(pk=exec_id).values_list("stopped_by", flat=True).first() or ""


def exec_forget(exec_id: str) -> None:
    """Ends the record `exec_record` wrote, once its command ended."""
    if exec_id:
        execute(connection, _FORGET, [exec_id])


def running_of_item(item: Item) -> list[RunningExec]:
    """The item's commands still running, oldest first (a dead process's record no longer counts)."""
    return list(RunningExec.objects.filter(item=item, ends_by__gt=clock.now()).order_by("started_at", "exec_id"))


def explained(result: ExecResult, activity: SandboxActivity, *, stopped_by: Callable[[], str]) -> ExecResult:
    """The backend's `reason` with the app's part: who stopped the command (`stopped_by` reads
    it, only then), and who or what closed its sandbox under it (the ledger row says, whichever
    backend ran it). A command that exited by itself costs no query."""
    if result.reason == EndReason.STOPPED:
        stopper = stopped_by()
        if stopper == SERVER_SHUTDOWN:
            return replace(result, reason_detail=_SHUTDOWN_DETAIL, ended_by="")
        detail = f"{stopper} stopped it before it finished." if stopper else result.reason_detail
        return replace(result, reason_detail=detail, ended_by=stopper)
    if result.reason not in (EndReason.EXITED, EndReason.SANDBOX_CLOSED) or not result.exit_code:
        return result
    row = SandboxActivity.objects.filter(pk=activity.pk).values_list("close_reason", "closed_by").first()
    reason, closed_by = row or ("", "")
    if not reason and result.reason == EndReason.EXITED:
        return result  # the sandbox runs on: the command ended by itself
    if closed_by:
        detail = f"{closed_by} closed its sandbox while it ran."
    else:
        detail = _CLOSED_UNDER_IT.get(reason, _CLOSED_UNDER_IT[Reason.CLOSED])
    return replace(result, reason=EndReason.SANDBOX_CLOSED, reason_detail=detail, ended_by=closed_by)

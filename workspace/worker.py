"""The engine of `manage.py worker` (README "Background work"): runs tasks and the periodic schedule.

One loop per process: enqueue the periodic tasks that are due, hand tasks whose worker died to
this one, then claim and run the ready tasks of the "default" queue (ingest, the periodic jobs) one
by one. Scheduled workflow runs, which may take minutes, are on the "workflows" queue, run by
WORKSPACE_WORKER_WORKFLOW_THREADS threads of their own, so an ingest never waits behind one; and a
person's runs take one of those threads at a time (a run is claimed only while no other run of
the same person is running anywhere), so one person's long runs never hold up everyone else's.

A task that raises is logged, recorded on its row and tried again later
(`collab.background.retry_delay`); after the last attempt its row stays `FAILED` with the
traceback and the task's recorder says why on the object it worked on. Nothing a task does stops
the loop.

A heartbeat thread writes `WorkerBeat` every WORKSPACE_WORKER_HEARTBEAT_SECONDS, however long a
task runs. `/healthz` reads the newest beat, and a task still `RUNNING` under a worker whose beat is
older than WORKSPACE_WORKER_STALE_SECONDS (killed, machine gone) is given back to the queue.
"""

from __future__ import annotations

import enum
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.db import close_old_connections, connections, transaction
from django.db.models import F, Max, OuterRef, Q, QuerySet, Subquery, TextField, Value
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Coalesce
from django.db.utils import OperationalError
from django.utils.crypto import get_random_string
from django_tasks import DEFAULT_TASK_BACKEND_ALIAS, TaskContext, TaskResultStatus
from django_tasks.base import Task
from django_tasks.signals import task_finished, task_started
from django_tasks.utils import get_exception_traceback, normalize_json
from django_tasks_db.models import DBTaskResult, get_date_max
from django_tasks_db.utils import exclusive_transaction, is_locked_database_exception

from collab import clock
from collab.background import enqueue, record_given_up, retry_delay
from collab.edge import failure_line
from knowledge.tasks import KNOWLEDGE_QUEUE
from workspace.models import PeriodicJob, WorkerBeat
from workspace.tasks import PERIODIC
from workspace.workflows.tasks import RUNS_QUEUE

logger = logging.getLogger(__name__)

# How often an idle worker looks for new tasks and due periodic jobs.
POLL_SECONDS = 1.0
WORKER_LOST = "workspace.worker.WorkerLost"
DEFAULT_QUEUE = "default"
# The order a single thread (`--once`, `drain`) takes the queues in.
QUEUES = (DEFAULT_QUEUE, RUNS_QUEUE, KNOWLEDGE_QUEUE)


class Outcome(enum.StrEnum):
    SUCCEEDED = "succeeded"
    RETRYING = "retrying"
    FAILED = "failed"


@dataclass(frozen=True)
class Ran:
    task_name: str
    outcome: Outcome
    detail: str = ""


@dataclass
class WorkerIdentity:
    worker_id: str = field(default_factory=lambda: get_random_string(32))
    backend_name: str = DEFAULT_TASK_BACKEND_ALIAS
    started_at: datetime = field(default_factory=clock.now)
    # The task rows this process's threads hold right now: its own orphan scan leaves them alone.
    holding: set[Any] = field(default_factory=set)


def beat(worker: WorkerIdentity) -> None:
    WorkerBeat.objects.update_or_create(
        worker_id=worker.worker_id,
        defaults={
            "hostname": socket.gethostname()[:255],
            "pid": os.getpid(),
            "started_at": worker.started_at,
            "beat_at": clock.now(),
        },
    )


def latest_beat() -> datetime | None:
    return WorkerBeat.objects.aggregate(latest=Max("beat_at"))["latest"]


def _stale_before() -> datetime:
    return clock.now() - timedelta(seconds=settings.WORKSPACE_WORKER_STALE_SECONDS)


def periodic_enqueue(*, interval: float, force: bool = False) -> list[str]:
    """Enqueues each periodic task whose interval has passed (every one with `force`); returns their names.

    A job is taken by compare-and-set on its `due_at`, in the transaction that enqueues it, so
    several workers enqueue it once per interval between them. A job whose last run is still
    waiting in the queue is not enqueued again: a slow worker never piles them up.
    """
    moment = clock.now()
    due_at = dict(PeriodicJob.objects.values_list("name", "due_at"))
    missing = [job for job in PERIODIC if job.module_path not in due_at]
    if missing:
        PeriodicJob.objects.bulk_create(
            [PeriodicJob(name=job.module_path, due_at=moment) for job in missing], ignore_conflicts=True
        )
        due_at.update({job.module_path: moment for job in missing})
    due_names = {name for name, due in due_at.items() if force or due <= moment}
    enqueued = []
    for job in PERIODIC:
        if job.module_path not in due_names:
            continue
        with transaction.atomic():
            jobs = PeriodicJob.objects.filter(name=job.module_path)
            if not force:
                jobs = jobs.filter(due_at__lte=moment)
            if not jobs.update(due_at=moment + timedelta(seconds=interval)) or _waiting(job):
                continue
            enqueue(job)
        enqueued.append(job.name)
    return enqueued


def _waiting(job: Task) -> bool:
    # Served by the backend's partial index on READY rows.
    return DBTaskResult.objects.filter(status=TaskResultStatus.READY, task_path=job.module_path).exists()


def _run_owner() -> Coalesce:
    # Whose run a task of the runs queue is (its `user_id`); runs queued before it was passed share a blank one.
    return Coalesce(
        KeyTextTransform("user_id", KeyTransform("kwargs", "args_kwargs")), Value(""), output_field=TextField()
    )


def _ready(worker: WorkerIdentity, queue: str) -> QuerySet[DBTaskResult]:
    """The tasks of `queue` due now (like the backend's own `ready()`, on the injectable clock); on
    the runs queue only those of people with no run running, in this worker or any other."""
    rows = DBTaskResult.objects.filter(
        status=TaskResultStatus.READY, backend_name=worker.backend_name, queue_name=queue
    ).filter(Q(run_after=get_date_max()) | Q(run_after__lte=clock.now()))
    if queue == KNOWLEDGE_QUEUE:
        return _in_turns(rows)
    if queue != RUNS_QUEUE:
        return rows
    running = DBTaskResult.objects.filter(
        status=TaskResultStatus.RUNNING, backend_name=worker.backend_name, queue_name=RUNS_QUEUE
    ).annotate(owner=_run_owner())
    return rows.annotate(owner=_run_owner()).exclude(owner__in=running.values("owner"))


def _in_turns(rows: QuerySet[DBTaskResult]) -> QuerySet[DBTaskResult]:
    """The next of `rows` when people take turns: the oldest ready task of the person (its `user_id`)
    whose last task on the queue started longest ago (or never), so one person's fifteen uploads hold
    another's one for a single task, not fifteen. Chosen in a subquery: a row locked FOR UPDATE
    cannot be ordered by another query's rows in the same statement."""
    last_turn = (
        DBTaskResult.objects.filter(queue_name=KNOWLEDGE_QUEUE, started_at__isnull=False)
        .annotate(owner=_run_owner())
        .filter(owner=OuterRef("owner"))
        .order_by("-started_at")
        .values("started_at")[:1]
    )
    first = (
        rows.annotate(owner=_run_owner(), last_turn=Subquery(last_turn))
        .order_by(F("last_turn").asc(nulls_first=True), "-priority", "enqueued_at")
        .values("pk")[:1]
    )
    return rows.filter(pk__in=Subquery(first))


def claim_next(worker: WorkerIdentity, *, queue: str | None = None) -> DBTaskResult | None:
    """Takes the next ready task of `queue` (of any queue, in QUEUES order, when None) for this
    worker (SKIP LOCKED on PostgreSQL, an exclusive transaction on SQLite), or None."""
    for name in QUEUES if queue is None else (queue,):
        if (row := _claim(worker, name)) is not None:
            return row
    return None


def _claim(worker: WorkerIdentity, queue: str) -> DBTaskResult | None:
    ready = _ready(worker, queue)
    row = None
    try:
        with exclusive_transaction(ready.db):
            row = ready.select_for_update(skip_locked=True).first()
            if row is not None:
                # Held before the claim commits, so this process's orphan scan never sees it unheld.
                worker.holding.add(row.pk)
                row.claim(worker.worker_id)
    except OperationalError as exc:
        if row is not None:
            worker.holding.discard(row.pk)
        if is_locked_database_exception(exc):
            return None
        raise
    return row


def run_next(worker: WorkerIdentity, *, queue: str | None = None) -> Ran | None:
    """Claims and runs the next ready task of `queue` (any queue when None); None when none is ready."""
    row = claim_next(worker, queue=queue)
    if row is None:
        return None
    try:
        return run_claimed(row)
    finally:
        worker.holding.discard(row.pk)


def run_claimed(row: DBTaskResult) -> Ran:
    """Runs one claimed task and records how it ended; never raises for what the task did."""
    try:
        task = row.task
    except (ImportError, SuspiciousOperation) as exc:
        logger.error("Task %s names no task (%s): %s", row.id, row.task_path, exc)
        row.set_failed(exc)
        return Ran(row.task_path, Outcome.FAILED, f"{type(exc).__name__}: {exc}")
    result = row.task_result
    sender = type(task.get_backend())
    task_started.send(sender=sender, task_result=result)
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=result), *result.args, **result.kwargs)
        else:
            value = task.call(*result.args, **result.kwargs)
        row.set_successful(normalize_json(value))
    except Exception as exc:
        logger.exception("Task %s (%s) failed on attempt %s", task.name, row.id, len(row.worker_ids))
        ran = _after_failure(row, task, exc)
    else:
        ran = Ran(task.name, Outcome.SUCCEEDED, _summary(value))
    task_finished.send(sender=sender, task_result=row.task_result)
    return ran


def _summary(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{key} {count}" for key, count in value.items())
    return "" if value is None else str(value)


def _after_failure(row: DBTaskResult, task: Task, exc: Exception) -> Ran:
    attempt = len(row.worker_ids)
    detail = failure_line(exc)
    if attempt < settings.WORKSPACE_TASK_MAX_ATTEMPTS:
        # Back in the queue with the traceback kept on the row, for admin to see meanwhile.
        DBTaskResult.objects.filter(pk=row.pk).update(
            status=TaskResultStatus.READY,
            run_after=clock.now() + retry_delay(attempt),
            exception_class_path=f"{type(exc).__module__}.{type(exc).__qualname__}",
            traceback=get_exception_traceback(exc),
        )
        return Ran(task.name, Outcome.RETRYING, detail)
    row.set_failed(exc)
    record_given_up(row.task_path, reason=f"Failed after {attempt} attempts ({detail}).", kwargs=result_kwargs(row))
    return Ran(task.name, Outcome.FAILED, detail)


def result_kwargs(row: DBTaskResult) -> dict[str, Any]:
    return dict(row.args_kwargs.get("kwargs") or {})


def orphans_requeue(worker: WorkerIdentity) -> int:
    """Gives back to the queue the tasks left `RUNNING` by a worker that stopped beating (or by
    this one, when none of its threads holds them); a task that already used its last attempt is
    failed instead, with the reason. Returns how many were handled."""
    alive = set(WorkerBeat.objects.filter(beat_at__gte=_stale_before()).values_list("worker_id", flat=True))
    alive.discard(worker.worker_id)
    handled = 0
    running = DBTaskResult.objects.filter(status=TaskResultStatus.RUNNING, backend_name=worker.backend_name)
    rows = list(running.only("id", "worker_ids", "task_path", "args_kwargs"))
    # Read after the rows: a row a thread claimed was held before its claim could be seen.
    held = frozenset(worker.holding)
    for row in rows:
        owner = row.worker_ids[-1] if row.worker_ids else ""
        if owner in alive or row.pk in held:
            continue
        attempt = len(row.worker_ids)
        reason = f"The worker running it ({owner or 'unknown'}) stopped during attempt {attempt}."
        same = DBTaskResult.objects.filter(pk=row.pk, status=TaskResultStatus.RUNNING)
        if attempt >= settings.WORKSPACE_TASK_MAX_ATTEMPTS:
            if same.update(
                status=TaskResultStatus.FAILED,
                finished_at=clock.now(),
                exception_class_path=WORKER_LOST,
                traceback=reason,
            ):
                record_given_up(
                    row.task_path, reason=f"Failed after {attempt} attempts. {reason}", kwargs=result_kwargs(row)
                )
                handled += 1
        elif same.update(status=TaskResultStatus.READY, run_after=clock.now()):
            logger.warning("Task %s (%s) requeued: %s", row.task_path, row.id, reason)
            handled += 1
    return handled


def drain(worker: WorkerIdentity, *, limit: int | None = None) -> list[Ran]:
    """Runs ready tasks until none is left (or `limit` ran); what they enqueue runs too."""
    ran: list[Ran] = []
    while limit is None or len(ran) < limit:
        one = run_next(worker)
        if one is None:
            break
        ran.append(one)
    return ran


def run_once(worker: WorkerIdentity, *, interval: float) -> list[Ran]:
    """`manage.py worker --once`: every periodic task now, the orphans back, everything due drained."""
    beat(worker)
    periodic_enqueue(interval=interval, force=True)
    orphans_requeue(worker)
    ran = drain(worker)
    WorkerBeat.objects.filter(worker_id=worker.worker_id).delete()
    return ran


class Heartbeat(threading.Thread):
    def __init__(self, worker: WorkerIdentity, stop: threading.Event) -> None:
        super().__init__(name="worker-heartbeat", daemon=True)
        self.worker, self.stop = worker, stop

    def run(self) -> None:
        try:
            while not self.stop.wait(settings.WORKSPACE_WORKER_HEARTBEAT_SECONDS):
                try:
                    beat(self.worker)
                except Exception as exc:
                    logger.warning("Heartbeat of worker %s failed: %s", self.worker.worker_id, exc)
                    close_old_connections()
        finally:
            connections.close_all()


class Passes:
    """How the passes of a worker's threads go: a failure (the database went away, a row could not
    be written) is said once with its traceback, then briefly each time until a pass works again."""

    def __init__(self, worker: WorkerIdentity) -> None:
        self.worker, self.failing = worker, False
        self._lock = threading.Lock()

    def failed(self, exc: Exception) -> None:
        with self._lock:
            first, self.failing = not self.failing, True
        if first:
            logger.exception("Worker %s: a pass failed; trying again", self.worker.worker_id)
        else:
            logger.warning("Worker %s: still failing (%s)", self.worker.worker_id, exc)
        close_old_connections()

    def worked(self) -> None:
        with self._lock:
            recovered, self.failing = self.failing, False
        if recovered:
            logger.warning("Worker %s: passes work again", self.worker.worker_id)


class QueueThread(threading.Thread):
    """Runs the tasks of one queue until `stop` is set; the task in hand is finished first."""

    def __init__(
        self, worker: WorkerIdentity, *, queue: str, stop: threading.Event, passes: Passes, report: Any, number: int
    ) -> None:
        super().__init__(name=f"worker-{queue}-{number}", daemon=True)
        self.worker, self.queue, self.stop, self.passes, self.report = worker, queue, stop, passes, report

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                close_old_connections()
                try:
                    ran = run_next(self.worker, queue=self.queue)
                except Exception as exc:
                    self.passes.failed(exc)
                    ran = None
                else:
                    self.passes.worked()
                if ran is None:
                    self.stop.wait(POLL_SECONDS)
                elif self.report is not None:
                    self.report(ran)
        finally:
            connections.close_all()


def run_forever(worker: WorkerIdentity, *, interval: float, stop: threading.Event, report: Any = None) -> None:
    """The worker loop, until `stop` is set (SIGTERM/SIGINT): the tasks in hand are finished first.

    This thread enqueues the periodic tasks, requeues orphans and runs the "default" queue;
    WORKSPACE_WORKER_WORKFLOW_THREADS others run the workflow runs, and one the knowledge base's
    uploads (people taking turns, `_in_turns`). A database that is down (at
    start or later) makes a pass fail; the loop logs it and tries again, so the process outlives
    the outage instead of leaving the deployment without a worker.
    """
    try:
        beat(worker)
    except Exception:
        logger.exception(
            "Worker %s could not write its first heartbeat; the heartbeat thread retries", worker.worker_id
        )
    Heartbeat(worker, stop).start()
    passes = Passes(worker)
    runners = [
        QueueThread(worker, queue=RUNS_QUEUE, stop=stop, passes=passes, report=report, number=number)
        for number in range(settings.WORKSPACE_WORKER_WORKFLOW_THREADS)
    ]
    # Uploads have their own thread: however many there are, the liveness and scheduling tasks of
    # the default queue are never behind them (a sandbox whose probe came late would be closed).
    runners.append(QueueThread(worker, queue=KNOWLEDGE_QUEUE, stop=stop, passes=passes, report=report, number=0))
    for runner in runners:
        runner.start()
    next_recovery = 0.0
    try:
        while not stop.is_set():
            close_old_connections()
            try:
                periodic_enqueue(interval=interval)
                if time.monotonic() >= next_recovery:
                    orphans_requeue(worker)
                    next_recovery = time.monotonic() + interval
                while not stop.is_set() and (ran := run_next(worker, queue=DEFAULT_QUEUE)) is not None:
                    if report is not None:
                        report(ran)
            except Exception as exc:
                passes.failed(exc)
            else:
                passes.worked()
            stop.wait(POLL_SECONDS)
    finally:
        for runner in runners:
            runner.join()
        try:
            WorkerBeat.objects.filter(worker_id=worker.worker_id).delete()
        except Exception:
            logger.warning("Worker %s could not remove its heartbeat", worker.worker_id)

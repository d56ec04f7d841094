"""The workflow scheduler, a periodic task of `manage.py worker`.

Each scheduled workflow (enabled, `every_seconds`, an `item_id`) has one `WorkflowSchedule`
row. A worker claims a due row with `SELECT ... FOR UPDATE SKIP LOCKED` and moves its
`next_run_at` forward in the same short transaction that enqueues the run of that window, so a
second worker either skips the locked row or, after the commit, no longer finds it due: the same
window is never enqueued twice. The compare-and-set on `next_run_at` keeps that true on SQLite,
which has no row locks. The run itself is a task (workflows/tasks.py) with one record per window.
A window that comes due while the workflow's previous run still waits or runs is skipped, like a
missed one: a run longer than its interval never piles windows up in the queue.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django_tasks import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from collab import clock
from collab.background import enqueue
from workspace.workflows.definitions import live_definitions, workflow_creator
from workspace.workflows.models import WorkflowSchedule
from workspace.workflows.tasks import scheduled_workflow_run_task

logger = logging.getLogger(__name__)
MAX_RUNS_PER_PASS = 50


@dataclass(frozen=True)
class ScheduledPass:
    scheduled: int
    enqueued: int


@transaction.atomic
def schedules_sync() -> int:
    """Mirrors the workflow definitions into schedule rows; returns how many workflows are scheduled.

    A new schedule is due at once; a changed interval or item applies from the next run on.
    """
    wanted = {d.id: d for d in live_definitions() if d.is_scheduled}
    WorkflowSchedule.objects.exclude(workflow_id__in=list(wanted)).delete()
    existing = {row.workflow_id: row for row in WorkflowSchedule.objects.filter(workflow_id__in=list(wanted))}
    moment = clock.now()
    fresh = []
    for workflow_id, definition in wanted.items():
        row = existing.get(workflow_id)
        if row is None:
            fresh.append(
                WorkflowSchedule(
                    workflow_id=workflow_id,
                    item_id=definition.scheduled_item_id,
                    every_seconds=definition.every_seconds,
                    next_run_at=moment,
                )
            )
        elif (row.item_id, row.every_seconds) != (definition.scheduled_item_id, definition.every_seconds):
            WorkflowSchedule.objects.filter(pk=row.pk).update(
                item_id=definition.scheduled_item_id, every_seconds=definition.every_seconds
            )
    # Another worker may insert the same rows meanwhile; the unique workflow_id settles it.
    WorkflowSchedule.objects.bulk_create(fresh, ignore_conflicts=True)
    return len(wanted)


def schedule_claim_due() -> bool:
    """Claims the most overdue schedule: locks it (skipping rows another worker holds), moves
    `next_run_at` one interval past now and enqueues the run of the claimed window, all in one
    transaction, so a crash either keeps the schedule due or leaves its run queued. False when
    nothing is due."""
    moment = clock.now()
    with transaction.atomic():
        row = (
            WorkflowSchedule.objects.select_for_update(skip_locked=True)
            .filter(next_run_at__lte=moment)
            .order_by("next_run_at", "pk")
            .first()
        )
        if row is None:
            return False
        # Missed intervals are skipped, not caught up: a worker that was down runs once, not N times.
        claimed = WorkflowSchedule.objects.filter(pk=row.pk, next_run_at=row.next_run_at).update(
            next_run_at=moment + timedelta(seconds=row.every_seconds), last_claimed_at=moment
        )
        if claimed and _run_pending(row.workflow_id):
            logger.info("scheduled workflow %s: window skipped, its previous run is not finished", row.workflow_id)
        elif claimed:
            enqueue(
                scheduled_workflow_run_task,
                workflow_id=row.workflow_id,
                item_id=row.item_id,
                window_at=row.next_run_at.isoformat(),
                user_id=workflow_creator(row.workflow_id),
            )
    return True


def _run_pending(workflow_id: str) -> bool:
    """Is a run of this workflow queued or running (on the database backend; a broker's queue is its own)?"""
    return DBTaskResult.objects.filter(
        task_path=scheduled_workflow_run_task.module_path,
        status__in=[TaskResultStatus.READY, TaskResultStatus.RUNNING],
        args_kwargs__kwargs__workflow_id=workflow_id,
    ).exists()


def schedules_enqueue_due(*, limit: int = MAX_RUNS_PER_PASS) -> ScheduledPass:
    """One scheduler pass: sync, then claim due windows one at a time and enqueue their runs."""
    scheduled = schedules_sync()
    enqueued = 0
    while enqueued < limit and schedule_claim_due():
        enqueued += 1
    return ScheduledPass(scheduled=scheduled, enqueued=enqueued)

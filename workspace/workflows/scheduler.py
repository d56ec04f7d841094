"""The workflow scheduler, run by `manage.py worker` with the other periodic jobs.

Each scheduled workflow (enabled, `every_seconds`, an `item_id`) has one `WorkflowSchedule`
row. A worker claims a due row with `SELECT ... FOR UPDATE SKIP LOCKED` and moves its
`next_run_at` forward in the same short transaction, so a second worker either skips the locked
row or, after the commit, no longer finds it due: the same due run never starts twice. The
compare-and-set on `next_run_at` keeps that true on SQLite, which has no row locks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction

from collab import clock
from workspace.models import WorkflowRun, WorkflowSchedule
from workspace.workflows.definitions import live_definitions
from workspace.workflows.services import scheduled_run

logger = logging.getLogger(__name__)
MAX_RUNS_PER_PASS = 50


@dataclass(frozen=True)
class ScheduledPass:
    scheduled: int
    started: int
    not_run: int


@dataclass(frozen=True)
class Claim:
    workflow_id: str
    item_id: int


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


def schedule_claim_due() -> Claim | None:
    """Claims the most overdue schedule: locks it (skipping rows another worker holds) and moves
    `next_run_at` one interval past now, committing before the run starts."""
    moment = clock.now()
    with transaction.atomic():
        row = (
            WorkflowSchedule.objects.select_for_update(skip_locked=True)
            .filter(next_run_at__lte=moment)
            .order_by("next_run_at", "pk")
            .first()
        )
        if row is None:
            return None
        # Missed intervals are skipped, not caught up: a worker that was down runs once, not N times.
        claimed = WorkflowSchedule.objects.filter(pk=row.pk, next_run_at=row.next_run_at).update(
            next_run_at=moment + timedelta(seconds=row.every_seconds), last_claimed_at=moment
        )
    return Claim(workflow_id=row.workflow_id, item_id=row.item_id) if claimed else None


def schedules_run_due(*, limit: int = MAX_RUNS_PER_PASS) -> ScheduledPass:
    """One scheduler pass: sync, then start due runs one claim at a time."""
    scheduled = schedules_sync()
    started = not_run = 0
    while started + not_run < limit:
        claim = schedule_claim_due()
        if claim is None:
            break
        run = scheduled_run(workflow_id=claim.workflow_id, item_id=claim.item_id)
        if run.status == WorkflowRun.Status.NOT_RUN:
            not_run += 1
        else:
            started += 1
    return ScheduledPass(scheduled=scheduled, started=started, not_run=not_run)

"""The periodic tasks `manage.py worker` enqueues every interval, in this order.

Each is its own task so that one failing (a sandbox host down, a locked database) neither stops
the others nor the worker. Probes and reclaim come before the scheduler, so scheduled runs open
sandboxes against a ledger they just cleaned.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta

from django.conf import settings
from django_tasks import task
from django_tasks.base import Task
from django_tasks_db.models import DBTaskResult

from collab import clock
from knowledge.ingest import embeddings_backfill
from knowledge.services import citation_slices_close
from knowledge.tasks import KNOWLEDGE_QUEUE
from workspace.items import lifecycle
from workspace.items.services import workspaces_sweep
from workspace.models import WorkerBeat
from workspace.workflows.scheduler import schedules_enqueue_due


@task()
def sandboxes_probe_task() -> dict[str, int]:
    """Liveness: renews the leases of sandboxes that still run, closes those that are gone."""
    return asdict(lifecycle.sandboxes_probe())


@task()
def sandboxes_reclaim_task() -> dict[str, int]:
    """Closes idle sandboxes and those whose lease ran out (their processes killed first)."""
    return asdict(lifecycle.sandboxes_reclaim())


@task()
def sandboxes_reconcile_task() -> dict[str, int]:
    """Closes the sandboxes a backend runs that the ledger does not know."""
    return asdict(lifecycle.sandboxes_reconcile())


@task()
def disk_sweep_task() -> dict[str, int]:
    """Measures the workspaces of payers with a disk limit for the disk ledger."""
    return {"measured": workspaces_sweep()}


@task()
def schedules_task() -> dict[str, int]:
    """Claims the due schedule windows and enqueues their runs."""
    return asdict(schedules_enqueue_due())


@task()
def citation_slices_task() -> dict[str, int]:
    """Folds the hours of citation events that ended into the summaries."""
    return asdict(citation_slices_close())


@task(queue_name=KNOWLEDGE_QUEUE)
def embeddings_backfill_task() -> dict[str, int]:
    """Embeds a batch of the chunks still pending (a provider that failed at ingest, a new model)."""
    return embeddings_backfill()


@task()
def task_results_prune_task() -> dict[str, int]:
    """Deletes finished task results older than WORKSPACE_TASK_RESULT_DAYS (admin shows the rest)
    and the heartbeats of workers gone that long."""
    cutoff = clock.now() - timedelta(days=settings.WORKSPACE_TASK_RESULT_DAYS)
    deleted, _ = DBTaskResult.objects.finished().filter(finished_at__lt=cutoff).delete()
    gone, _ = WorkerBeat.objects.filter(beat_at__lt=cutoff).delete()
    return {"deleted": deleted, "workers_forgotten": gone}


PERIODIC: tuple[Task, ...] = (
    sandboxes_probe_task,
    sandboxes_reclaim_task,
    sandboxes_reconcile_task,
    disk_sweep_task,
    schedules_task,
    citation_slices_task,
    embeddings_backfill_task,
    task_results_prune_task,
)

"""Reads of workflow runs."""

from __future__ import annotations

from typing import Any

from collab.clock import epoch_ms
from workspace.workflows.models import WorkflowRun

RUNS_LIMIT = 50


def runs_of_workflow(*, workflow_id: str, item_id: int | None = None, limit: int = RUNS_LIMIT) -> list[WorkflowRun]:
    """Newest first; scheduled failure records included (they are the point of the list)."""
    rows = WorkflowRun.objects.filter(workflow_id=workflow_id)
    if item_id is not None:
        rows = rows.filter(item_id=item_id)
    return list(rows.order_by("-id")[:limit])


def run_as_dict(run: WorkflowRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "workflow_id": run.workflow_id,
        "revision_id": run.revision_id,
        "item_id": run.item_id,
        "trigger": run.trigger,
        "status": run.status,
        "reason": run.reason,
        "steps": run.steps,
        "started_at": epoch_ms(run.started_at),
        "finished_at": epoch_ms(run.finished_at),
        "created_by": run.created_by or None,
    }

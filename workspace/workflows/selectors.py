"""Reads of workflow runs."""

from __future__ import annotations

from workspace.workflows.models import WorkflowRun

RUNS_LIMIT = 50


def runs_of_workflow(*, workflow_id: str, item_id: int | None = None, limit: int = RUNS_LIMIT) -> list[WorkflowRun]:
    """Newest first; scheduled failure records included (they are the point of the list)."""
    rows = WorkflowRun.objects.filter(workflow_id=workflow_id)
    if item_id is not None:
        rows = rows.filter(item_id=item_id)
    return list(rows.order_by("-id")[:limit])

"""The workflow tasks: the run of one schedule window."""

from __future__ import annotations

from datetime import datetime

from django_tasks import task

from collab.background import when_given_up
from workspace.workflows.services import scheduled_run, scheduled_run_given_up


@task()
def scheduled_workflow_run_task(workflow_id: str, item_id: int, window_at: str) -> str:
    """Runs (or records why it could not run) one window; returns the record's status."""
    run = scheduled_run(workflow_id=workflow_id, item_id=item_id, window_at=datetime.fromisoformat(window_at))
    return run.status


def _record_given_up(*, reason: str, workflow_id: str, item_id: int, window_at: str) -> None:
    scheduled_run_given_up(
        workflow_id=workflow_id, item_id=item_id, window_at=datetime.fromisoformat(window_at), reason=reason
    )


when_given_up(scheduled_workflow_run_task, _record_given_up)

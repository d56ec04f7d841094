"""The workflow tasks: the run of one schedule window, on a queue of its own."""

from __future__ import annotations

from datetime import datetime

from django_tasks import task

from collab.background import when_given_up
from workspace.workflows.services import scheduled_run, scheduled_run_given_up

# A run may take minutes: `manage.py worker` serves this queue with threads of its own, so ingest
# and the periodic jobs (on "default") never wait behind one, and one person's runs take at most
# one of those threads at a time (`user_id` says whose run it is).
RUNS_QUEUE = "workflows"


@task(queue_name=RUNS_QUEUE)
def scheduled_workflow_run_task(workflow_id: str, item_id: int, window_at: str, user_id: str = "") -> str:
    """Runs (or records why it could not run) one window; returns the record's status. `user_id` is
    the workflow's creator, whom the run acts for (blank in runs queued before it was passed)."""
    run = scheduled_run(workflow_id=workflow_id, item_id=item_id, window_at=datetime.fromisoformat(window_at))
    return run.status


def _record_given_up(*, reason: str, workflow_id: str, item_id: int, window_at: str, user_id: str = "") -> None:
    scheduled_run_given_up(
        workflow_id=workflow_id, item_id=item_id, window_at=datetime.fromisoformat(window_at), reason=reason
    )


when_given_up(scheduled_workflow_run_task, _record_given_up)

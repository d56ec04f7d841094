"""Demo workflow: an hourly health check on alice's first notebook (after workspace.items.demo),
saved twice so its page has a revision to compare and switch back to. Its first run is an hour
after loading, not at once: a new visitor's first page shows nothing of theirs in use."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from collab import clock
from workspace.items.demo import DEMO_ITEMS
from workspace.items.models import Item
from workspace.workflows.definitions import live_definitions
from workspace.workflows.generated import workflows
from workspace.workflows.models import WorkflowSchedule

DEMO_WORKFLOW = "Workspace health check"


def load_workflow(say: Callable[[str], None]) -> None:
    item = Item.objects.filter(app_slug="notebook", created_by="alice", title=DEMO_ITEMS[0][0]).first()
    if item is None or any(d.name == DEMO_WORKFLOW for d in live_definitions()):
        return
    first = {
        "name": DEMO_WORKFLOW,
        "description": "Lists the workspace; the worker runs it hourly.",
        "steps": ["ls -la"],
        "item_id": str(item.pk),
        "every_seconds": 3600,
    }
    workflow_id = workflows.create(first, user="alice")["resource_id"]
    second = {**first, "description": "Lists the workspace and its disk use; the worker runs it hourly."}
    workflows.update(workflow_id, {**second, "steps": ["ls -la", "du -sh ."]}, user="alice")
    # A new schedule is due at once (`schedules_sync`); this one waits its first hour, or the
    # worker beside `make run` would open a sandbox on alice's notebook before anyone looks.
    WorkflowSchedule.objects.get_or_create(
        workflow_id=workflow_id,
        defaults={"item_id": item.pk, "every_seconds": 3600, "next_run_at": clock.now() + timedelta(hours=1)},
    )
    say(f"created workflow {workflow_id} {DEMO_WORKFLOW!r} on item {item.pk}, in two revisions, first run in an hour")


def load(*, say: Callable[[str], None]) -> None:
    """Idempotent: a workflow of the same name is left as it is."""
    load_workflow(say)

"""Demo workflow: an hourly health check on alice's first notebook (after workspace.items.demo),
saved twice so its page has a revision to compare and switch back to."""

from __future__ import annotations

from collections.abc import Callable

from workspace.items.demo import DEMO_ITEMS
from workspace.items.models import Item
from workspace.workflows.definitions import live_definitions
from workspace.workflows.generated import workflows

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
    say(f"created workflow {workflow_id} {DEMO_WORKFLOW!r} on item {item.pk}, in two revisions")


def load(*, say: Callable[[str], None]) -> None:
    """Idempotent: a workflow of the same name is left as it is."""
    load_workflow(say)

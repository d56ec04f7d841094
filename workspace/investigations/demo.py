"""Demo of what runs on items: an hourly workflow on alice's notebook and an investigation (after workspace.demo)."""

from __future__ import annotations

from collections.abc import Callable

from workspace.demo import DEMO_ITEMS
from workspace.generated import workflows
from workspace.investigations import services as investigation_services
from workspace.models import Investigation, Item
from workspace.workflows.definitions import live_definitions

DEMO_WORKFLOW = "Workspace health check"
DEMO_INVESTIGATION = "Checkout latency spike"


def load_workflow(say: Callable[[str], None]) -> None:
    item = Item.objects.filter(app_slug="notebook", created_by="alice", title=DEMO_ITEMS[0][0]).first()
    if item is None or any(d.name == DEMO_WORKFLOW for d in live_definitions()):
        return
    data = {
        "name": DEMO_WORKFLOW,
        "description": "Lists the workspace and its disk use; the worker runs it hourly.",
        "steps": ["ls -la", "du -sh ."],
        "item_id": str(item.pk),
        "every_seconds": 3600,
    }
    workflow_id = workflows.create(data, user="alice")["resource_id"]
    say(f"created workflow {workflow_id} {DEMO_WORKFLOW!r} on item {item.pk}")


def load_investigation(say: Callable[[str], None]) -> None:
    if Investigation.objects.filter(item__created_by="alice", item__title=DEMO_INVESTIGATION).exists():
        return
    investigation = investigation_services.investigation_create(
        title=DEMO_INVESTIGATION, user_id="alice", members=["bob"]
    )
    investigation_services.mention_create(
        investigation_id=investigation.pk,
        user_id="alice",
        user_ids=["carol"],
        note="The p95 doubled after the 14:00 deploy; can you check the data pipeline?",
    )
    investigation_services.status_change(investigation_id=investigation.pk, user_id="alice", status="in_progress")
    say(f"created investigation {investigation.pk} {DEMO_INVESTIGATION!r} (members bob, carol)")


def load(*, say: Callable[[str], None]) -> None:
    """Idempotent: a workflow or investigation of the same name is left as it is."""
    load_workflow(say)
    load_investigation(say)

"""The workflow pages as runs pile up: the list (a page of 25 workflows with each one's last run)
and one workflow's page (its 50 newest runs and 20 newest revisions).

.venv/bin/python bench/workflow_pages.py [--sizes 1000,10000,100000] [--database-url postgres://...]

Sizes are stored runs: a scheduled workflow every minute leaves 44,640 a month. The list shows
each workflow's newest run; `last run of 25: GROUP BY` is the plain aggregate the page does not
use (it reads every run of the page's workflows) beside `last run of 25: index probes`, the
page's one query of one `workflow_run_idx` probe per workflow. Neither page may grow with runs
it does not show.

`revision page (size = steps)` compares a revision with the current one when both have that many
steps (one in seven dropped since): the comparison must not cost the square of the steps.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import measure, parse_args, print_table, setup_django

BATCH = 20_000
STEP_SIZES = (100, 1000, 5000)
WORKFLOWS = 25
REVISIONS = 40
VIEWER = "bob"


def definitions() -> list[str]:
    """The viewer's page of workflows on one item of theirs, one edited REVISIONS times, and as
    many of someone else's (the list's scope must skip them)."""
    from workspace.items.models import Item
    from workspace.workflows.generated import workflows

    item = Item(app_slug="notebook", title="Bench notebook", owner=VIEWER)
    item.stamp_created(VIEWER)
    item.save()
    ids = []
    for number in range(WORKFLOWS):
        body = {"name": f"w{number}", "steps": ["true"], "item_id": str(item.pk), "every_seconds": 60}
        ids.append(workflows.create(body, user=VIEWER)["resource_id"])
        workflows.create({"name": f"other {number}", "steps": ["true"]}, user="dave")
    for revision in range(REVISIONS):
        workflows.update(ids[0], {"name": "w0", "steps": [f"echo {revision}"]}, user=VIEWER)
    return ids


def fill(workflow_ids: list[str], total: int, already: int) -> None:
    """Runs spread over the workflows, newest last, as the scheduler leaves them."""
    from django.utils import timezone

    from workspace.workflows.models import WorkflowRun

    moment = timezone.now()
    runs = (
        WorkflowRun(
            workflow_id=workflow_ids[index % len(workflow_ids)],
            trigger="scheduled",
            status="succeeded" if index % 7 else "failed",
            started_at=moment,
            finished_at=moment,
            created_by=VIEWER,
        )
        for index in range(already, total)
    )
    WorkflowRun.objects.bulk_create(runs, batch_size=BATCH)


def long_workflow(steps: int) -> tuple[str, str]:
    """A workflow of `steps` steps edited once to drop every seventh: its id and its first revision."""
    from workspace.workflows.generated import workflows

    every = [f"echo {number}" for number in range(steps)]
    created = workflows.create({"name": f"{steps} steps", "steps": every}, user=VIEWER)
    kept = [step for number, step in enumerate(every) if number % 7]
    workflows.update(created["resource_id"], {"name": f"{steps} steps", "steps": kept}, user=VIEWER)
    return created["resource_id"], created["current_revision_id"]


def last_runs_grouped(workflow_ids: list[str]) -> dict[str, int]:
    from django.db.models import Max

    from workspace.workflows.models import WorkflowRun

    rows = WorkflowRun.objects.filter(workflow_id__in=workflow_ids).values("workflow_id").annotate(last=Max("id"))
    return {row["workflow_id"]: row["last"] for row in rows}


def main() -> None:
    args = parse_args(__doc__ or "", "1000,10000,100000")
    os.environ.setdefault("WORKSPACE_REQUEST_LOG_LEVEL", "WARNING")
    vendor = setup_django(args.database_url, "workflow_pages")
    from django.db import connection
    from django.test import Client

    from workspace.workflows.selectors import last_runs

    workflow_ids = definitions()
    client = Client(HTTP_X_USER_ID=VIEWER)
    figures = []
    filled = 0
    for size in sorted(args.sizes):
        fill(workflow_ids, size, filled)
        filled = size
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE workflows_workflowrun" if vendor == "postgresql" else "ANALYZE")
        figures.append(measure("list page (25 workflows)", size, args.repeat, lambda: client.get("/workflows")))
        figures.append(measure("workflow page", size, args.repeat, lambda: client.get(f"/workflows/{workflow_ids[0]}")))
        figures.append(measure("last run of 25: index probes", size, args.repeat, lambda: last_runs(workflow_ids)))
        figures.append(measure("last run of 25: GROUP BY", size, args.repeat, lambda: last_runs_grouped(workflow_ids)))
    for steps in STEP_SIZES:
        workflow_id, revision_id = long_workflow(steps)
        page = f"/workflows/{workflow_id}/revisions/{revision_id}"
        repeat = max(1, args.repeat // 20)
        figures.append(measure("revision page (size = steps)", steps, repeat, lambda page=page: client.get(page)))
    print_table(vendor, figures)


if __name__ == "__main__":
    main()

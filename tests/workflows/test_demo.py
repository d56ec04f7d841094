"""The demo loader of workflows: one hourly workflow on alice's first notebook, with a revision to
switch back to, and nothing twice."""

from __future__ import annotations

import pytest

from quotas.models import SandboxActivity
from workspace.items import demo as items_demo
from workspace.workflows import demo
from workspace.workflows.definitions import live_definitions
from workspace.workflows.generated import workflows

pytestmark = pytest.mark.django_db


def test_the_demo_loads_one_scheduled_workflow_however_often_it_runs():
    # Given alice's demo notebooks
    lines: list[str] = []
    items_demo.load(say=lines.append)
    # When the workflow demo loads twice
    demo.load(say=lines.append)
    demo.load(say=lines.append)
    # Then one scheduled workflow exists
    scheduled = [d for d in live_definitions() if d.name == demo.DEMO_WORKFLOW]
    assert len(scheduled) == 1
    assert scheduled[0].is_scheduled


def test_the_demo_workflow_has_an_earlier_revision_to_compare():
    # Given alice's demo notebooks
    items_demo.load(say=lambda line: None)
    # When the workflow demo loads
    demo.load(say=lambda line: None)
    # Then its workflow has two revisions, the second current
    (definition,) = [d for d in live_definitions() if d.name == demo.DEMO_WORKFLOW]
    assert workflows.list_revisions(definition.id).total == 2
    assert definition.revision_id == f"{definition.id}:2"


def test_the_demo_workflow_first_runs_an_hour_after_loading_so_a_visitor_starts_with_nothing_in_use(
    clock, scheduler_tick
):
    # Given the demo loaded (alice's notebooks and the hourly workflow)
    items_demo.load(say=lambda line: None)
    demo.load(say=lambda line: None)
    # When the worker's scheduler passes at once, as it does when `make run` starts it
    first = scheduler_tick()
    # Then nothing runs and no sandbox opens for alice
    assert (first.scheduled, first.started, first.not_run) == (1, 0, 0)
    assert not SandboxActivity.objects.exists()
    # When an hour has passed / Then the workflow runs, as scheduled
    clock.advance(seconds=3601)
    assert scheduler_tick().started == 1

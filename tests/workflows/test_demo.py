"""The demo loader of workflows: one hourly workflow on alice's first notebook, and nothing twice."""

from __future__ import annotations

import pytest

from workspace.items import demo as items_demo
from workspace.workflows import demo
from workspace.workflows.definitions import live_definitions

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

"""The demo loader of investigations and workflows: one of each, and nothing twice."""

from __future__ import annotations

import pytest

from workspace import demo as core_demo
from workspace.investigations import demo
from workspace.models import Investigation, ItemMessage
from workspace.workflows.definitions import live_definitions

pytestmark = pytest.mark.django_db


def test_the_demo_loads_an_investigation_and_a_workflow_once():
    lines: list[str] = []
    core_demo.load(say=lines.append)
    demo.load(say=lines.append)
    demo.load(say=lines.append)
    investigation = Investigation.objects.get()
    assert (investigation.status, sorted(investigation.members.values_list("user_id", flat=True))) == (
        "in_progress", ["bob", "carol"],
    )  # fmt: skip
    assert list(ItemMessage.objects.values_list("role", flat=True)) == ["mention", "system"]
    scheduled = [d for d in live_definitions() if d.name == demo.DEMO_WORKFLOW]
    assert len(scheduled) == 1
    assert scheduled[0].is_scheduled

"""The demo loader of investigations: one investigation, and nothing twice."""

from __future__ import annotations

import pytest

from workspace.agent.models import ItemMessage
from workspace.investigations import demo
from workspace.investigations.models import Investigation

pytestmark = pytest.mark.django_db


def test_the_demo_loads_one_investigation_however_often_it_runs():
    # Given an empty database
    lines: list[str] = []
    # When the demo loads twice
    demo.load(say=lines.append)
    demo.load(say=lines.append)
    # Then there is one investigation, in progress, with bob and carol, a mention and a status move
    investigation = Investigation.objects.get()
    assert (investigation.status, sorted(investigation.members.values_list("user_id", flat=True))) == (
        "in_progress", ["bob", "carol"],
    )  # fmt: skip
    assert list(ItemMessage.objects.values_list("role", flat=True)) == ["mention", "system"]
    assert len(lines) == 1

"""Runs are numbered per workflow (issue 30.8): a new workflow's first run is "Run #1", whatever
other workflows ran before it; scheduled records and manual runs share their workflow's count."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from workspace.workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


def _run_now(api, workflow_id: str, item_id: int) -> WorkflowRun:
    response = api.post(f"/a/notebook/items/{item_id}/workflows/{workflow_id}/run", format="json")
    assert response.status_code < 400, response.content
    return WorkflowRun.objects.get(pk=response.json()["id"])


def test_a_new_workflows_first_run_is_number_one(alice_api, make_item, make_workflow):
    # Given a workflow that ran twice
    item = make_item()
    older = make_workflow(["true"], name="older", item_id=str(item.pk))
    _run_now(alice_api, older, item.pk)
    second = _run_now(alice_api, older, item.pk)
    newer = make_workflow(["true"], name="newer", item_id=str(item.pk))
    # When a new workflow runs for the first time
    first = _run_now(alice_api, newer, item.pk)
    # Then it is its run #1, the older one's second run its #2, and the page says "Run #1"
    assert (first.number, second.number) == (1, 2)
    page = alice_api.get(f"/workflows/{newer}", **HTML).content.decode()
    assert "Run #1" in page
    assert "Run #2" not in page


def test_the_api_answers_each_runs_number(alice_api, make_item, make_workflow):
    # Given a workflow on alice's notebook
    item = make_item()
    workflow_id = make_workflow(["true"], name="w", item_id=str(item.pk))
    # When she runs it twice through the API / Then the answers carry numbers 1 and 2
    numbers = [
        alice_api.post(f"/a/notebook/items/{item.pk}/workflows/{workflow_id}/run", format="json").json()["number"]
        for _ in range(2)
    ]
    assert numbers == [1, 2]


def test_runs_recorded_before_numbers_are_numbered_per_workflow_oldest_first(make_item):
    # Given runs of two workflows recorded interleaved, without numbers
    item = make_item()
    for workflow_id in ["a", "b", "a", "a", "b"]:
        WorkflowRun.objects.create(workflow_id=workflow_id, item=item, trigger="manual", status="succeeded")
    # When the migration numbers them
    migration = importlib.import_module("workspace.workflows.migrations.0002_run_numbers")
    migration.number_existing_runs(apps, None)
    # Then each workflow counts its own, oldest first
    numbered = list(WorkflowRun.objects.order_by("pk").values_list("workflow_id", "number"))
    assert numbered == [("a", 1), ("b", 1), ("a", 2), ("a", 3), ("b", 2)]

"""A workflow's limits: at most WORKSPACE_WORKFLOW_MAX_STEPS steps, refused when written (422), and
a run stopped once it has taken WORKSPACE_WORKFLOW_MAX_RUN_SECONDS, recorded as such."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from crudgen.models import StoredResource
from tests.fixtures.items import item_url
from workspace.workflows import services
from workspace.workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_steps_at_most(settings) -> int:
    settings.WORKSPACE_WORKFLOW_MAX_STEPS = 3
    return 3


def _run(api, item, workflow_id):
    return api.post(item_url(item, f"/workflows/{workflow_id}/run"), format="json")


def test_a_workflow_of_100000_steps_is_refused_with_422_and_nothing_is_stored(alice_api):
    # Given the default limit of 50 steps
    # When alice creates a workflow of 100,000 steps
    response = alice_api.post("/api/v1/workflow", {"name": "flood", "steps": ["true"] * 100_000}, format="json")

    # Then it is a 422 naming the limit, and nothing is stored
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "too_many_steps"
    assert "at most 50 steps (100000 given)" in body["detail"]
    assert not StoredResource.objects.exists()


def test_a_workflow_at_the_step_limit_is_stored(alice_api, three_steps_at_most):
    # Given a limit of three steps
    # When alice creates a workflow of three / Then it is stored
    response = alice_api.post("/api/v1/workflow", {"name": "three", "steps": ["a", "b", "c"]}, format="json")
    assert response.status_code == 201


def test_appending_a_step_past_the_limit_is_refused_and_keeps_the_revision(
    alice_api, make_workflow, three_steps_at_most
):
    # Given alice's workflow of three steps, at the limit
    workflow_id = make_workflow(["a", "b", "c"])
    before = alice_api.get(f"/api/v1/workflow/{workflow_id}/full").json()

    # When she appends a fourth with JSON Patch
    patch = [{"op": "add", "path": "/steps/-", "value": "d"}]
    response = alice_api.patch(
        f"/api/v1/workflow/{workflow_id}", json.dumps(patch), content_type="application/json-patch+json"
    )

    # Then it is refused and the workflow is as it was
    assert (response.status_code, response.json()["error"]) == (422, "too_many_steps")
    assert alice_api.get(f"/api/v1/workflow/{workflow_id}/full").json() == before


def test_the_form_refuses_too_many_steps_keeping_what_was_typed(alice_api, three_steps_at_most):
    # Given a limit of three steps
    # When alice submits the new-workflow form with four
    form = {"name": "Four", "steps": ["one", "two", "three", "four"], "every_unit": "hours", "enabled": "on"}
    response = alice_api.post("/workflows/new", form)

    # Then the form comes back saying why, with her steps, and nothing is stored
    page = response.content.decode()
    assert response.status_code == 422
    assert "Steps: a workflow has at most 3 steps (4 given)" in page
    assert ">four</textarea>" in page
    assert not StoredResource.objects.exists()


def test_a_workflow_stored_before_the_limit_is_refused_when_run_and_records_nothing(
    alice_api, make_item, make_workflow, three_steps_at_most
):
    # Given alice's workflow of four steps, stored (bypassing the API) before the limit of three
    item, workflow_id = make_item(), make_workflow(["true"] * 4)

    # When she runs it
    response = _run(alice_api, item, workflow_id)

    # Then it is refused, naming the limit, and no run is recorded
    assert (response.status_code, response.json()["error"]) == (400, "too_many_steps")
    assert not WorkflowRun.objects.exists()


def test_a_scheduled_workflow_over_the_limit_leaves_a_not_run_record(
    scheduler_tick, make_item, make_workflow, clock, three_steps_at_most
):
    # Given an hourly workflow of four steps stored before the limit of three
    make_workflow(["true"] * 4, item_id=str(make_item().pk), every_seconds=3600)

    # When the scheduler ticks
    scheduler_tick()

    # Then its window is recorded as not run, saying why
    run = WorkflowRun.objects.get()
    assert run.status == "not_run"
    assert "at most 3 steps (4 given)" in run.reason


def test_a_run_past_its_time_limit_is_stopped_and_recorded_as_such(alice_api, make_item, make_workflow, settings):
    # Given runs limited to one second, and a workflow whose first step would sleep for thirty
    settings.WORKSPACE_WORKFLOW_MAX_RUN_SECONDS = 1
    item, workflow_id = make_item(), make_workflow(["sleep 30", "echo never"])

    # When alice runs it
    body = _run(alice_api, item, workflow_id).json()

    # Then the first step was stopped at the limit, the second never ran, and the run says why
    assert (body["status"], body["reason"]) == ("failed", "Stopped during step 1: a run may take at most 1 s.")
    assert [(step["command"], step["timed_out"]) for step in body["steps"]] == [("sleep 30", True)]


def test_a_run_out_of_time_between_steps_does_not_start_the_next(alice_api, make_item, make_workflow, monkeypatch):
    # Given a workflow of two steps, and a clock on which the first step takes past the run's limit
    item, workflow_id = make_item(), make_workflow(["true", "echo never"])
    readings = iter([0.0, 1.0, 10_000.0])
    monkeypatch.setattr(services, "time", SimpleNamespace(monotonic=lambda: next(readings)))

    # When alice runs it
    body = _run(alice_api, item, workflow_id).json()

    # Then the second step never started, and the run says why
    assert (body["status"], body["reason"]) == ("failed", "Stopped before step 2: a run may take at most 600 s.")
    assert [step["command"] for step in body["steps"]] == ["true"]

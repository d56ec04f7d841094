"""Schedules are validated when written: `every_seconds` is 60 s to 31 days, or absent."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from crudgen.storage.base import Stored
from workspace.workflows import scheduler
from workspace.workflows.generated import workflows
from workspace.workflows.models import WorkflowRun, WorkflowSchedule

pytestmark = pytest.mark.django_db

OUT_OF_RANGE = [59, 0, -1, 2_678_401, 3_000_000_000, 10**30]
WRONG_TYPE = [True, "60", 60.5]
BODY = {"name": "nightly", "steps": ["echo tick"]}


@pytest.mark.parametrize("every_seconds", OUT_OF_RANGE)
def test_creating_a_workflow_with_an_interval_out_of_range_is_refused(alice_api, every_seconds):
    # Given alice, whose workflow intervals must lie between 60 s and 31 days
    # When alice creates a workflow that would run too often or too rarely
    response = alice_api.post("/api/v1/workflow", {**BODY, "every_seconds": every_seconds}, format="json")

    # Then it is a 422 naming the bounds, and nothing is stored
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "invalid_schedule"
    assert "between 60 and 2678400 seconds" in body["detail"]
    assert alice_api.get("/api/v1/workflow/count").json() == {"count": 0}


@pytest.mark.parametrize("every_seconds", WRONG_TYPE)
def test_an_interval_that_is_not_a_whole_number_is_refused(alice_api, every_seconds):
    # Given alice, whose intervals are whole seconds
    # When alice sends a boolean, a string or a fraction as the interval
    response = alice_api.post("/api/v1/workflow", {**BODY, "every_seconds": every_seconds}, format="json")

    # Then it is refused and nothing is stored
    assert response.status_code == 422
    assert alice_api.get("/api/v1/workflow/count").json() == {"count": 0}


@pytest.mark.parametrize("every_seconds", [None, 60, 2_678_400])
def test_the_bounds_and_no_schedule_are_accepted(alice_api, every_seconds):
    # Given alice, and the bounds of 60 s and 31 days
    # When alice creates a workflow at a bound, or unscheduled
    response = alice_api.post("/api/v1/workflow", {**BODY, "every_seconds": every_seconds}, format="json")

    # Then it is stored
    assert response.status_code == 201


@pytest.fixture
def hourly(alice_api) -> str:
    response = alice_api.post("/api/v1/workflow", {**BODY, "every_seconds": 3600}, format="json")
    assert response.status_code == 201
    return response.json()["resource_id"]


def _current(alice_api, rid: str) -> dict:
    return alice_api.get(f"/api/v1/workflow/{rid}/full").json()


def test_replacing_with_a_bad_interval_is_refused_and_keeps_the_revision(alice_api, hourly):
    # Given an hourly workflow at its first revision
    before = _current(alice_api, hourly)

    # When alice replaces it with a three-billion-second interval
    response = alice_api.put(f"/api/v1/workflow/{hourly}", {**BODY, "every_seconds": 3_000_000_000}, format="json")

    # Then it is refused and the workflow is as it was
    assert (response.status_code, response.json()["error"]) == (422, "invalid_schedule")
    assert _current(alice_api, hourly) == before


def test_patching_in_a_bad_interval_is_refused_and_keeps_the_revision(alice_api, hourly):
    # Given an hourly workflow
    before = _current(alice_api, hourly)

    # When alice patches the interval down to ten seconds
    patch = [{"op": "replace", "path": "/every_seconds", "value": 10}]
    response = alice_api.patch(
        f"/api/v1/workflow/{hourly}", json.dumps(patch), content_type="application/json-patch+json"
    )

    # Then it is refused and nothing changed
    assert (response.status_code, response.json()["error"]) == (422, "invalid_schedule")
    assert _current(alice_api, hourly) == before


def test_switching_back_to_a_revision_stored_before_the_rule_is_refused(alice_api, hourly):
    # Given a first revision written (before the rule) with a ten-second interval, then a valid one
    stored: Stored = workflows.read(hourly)
    workflows.update(hourly, {**stored.data, "every_seconds": 10}, user="alice")
    workflows.update(hourly, {**stored.data, "every_seconds": 7200}, user="alice")
    before = _current(alice_api, hourly)

    # When alice switches back to the ten-second revision
    response = alice_api.post(f"/api/v1/workflow/{hourly}/switch/{hourly}:2")

    # Then it is refused and the current revision stays
    assert (response.status_code, response.json()["error"]) == (422, "invalid_schedule")
    assert _current(alice_api, hourly) == before


def test_the_openapi_document_lists_the_refusal_on_writes(alice_api):
    # Given the OpenAPI schema the service serves
    # When it is read
    schema = alice_api.get("/api/schema", HTTP_ACCEPT="application/json").json()

    # Then creating a workflow documents the 422
    create = schema["paths"]["/api/v1/workflow"]["post"]
    assert "422" in create["responses"]


def test_a_definition_stored_before_the_rule_is_not_scheduled_and_stops_nobody(make_item, make_workflow, clock):
    # Given a valid hourly workflow and one stored (bypassing the API) with a three-billion-second interval
    item = make_item()
    make_workflow(["echo ok"], item_id=str(item.pk), every_seconds=3600)
    make_workflow(["echo never"], item_id=str(item.pk), every_seconds=3_000_000_000)
    make_workflow(["echo never"], item_id="99999999999999999999999", every_seconds=3600)

    # When the scheduler and the worker run
    scheduled = scheduler.schedules_sync()
    call_command("worker", "--once")

    # Then only the valid one is scheduled, and the worker ran it
    assert scheduled == 1
    assert WorkflowSchedule.objects.get().every_seconds == 3600
    assert list(WorkflowRun.objects.values_list("status", flat=True)) == ["succeeded"]

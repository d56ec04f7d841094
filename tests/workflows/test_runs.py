"""Manual workflow runs: the current revision's steps in the item's sandbox, recorded; refusals first."""

from __future__ import annotations

import pytest
from rest_framework.fields import DateTimeField

from tests.fixtures.items import item_url
from workspace.items import lifecycle
from workspace.workflows.generated import workflows
from workspace.workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db


def _run(api, item, workflow_id):
    return api.post(item_url(item, f"/workflows/{workflow_id}/run"), format="json")


def test_a_run_records_each_steps_exit_code_and_output(alice_api, make_item, make_workflow, clock):
    # Given alice's notebook and a workflow of two steps, one writing to stdout and one to stderr
    item, workflow_id = make_item(), make_workflow(["echo one", "echo two >&2"])
    # When she runs it on the notebook
    response = _run(alice_api, item, workflow_id)
    # Then the run succeeded, manual and hers, with each step's exit code and output, its times and its revision
    assert response.status_code == 201
    body = response.json()
    assert (body["status"], body["trigger"], body["item_id"], body["created_by"]) == (
        "succeeded",
        "manual",
        item.pk,
        "alice",
    )
    assert [(s["command"], s["exit_code"], s["stdout"], s["stderr"]) for s in body["steps"]] == [
        ("echo one", 0, "one\n", ""), ("echo two >&2", 0, "", "two\n"),
    ]  # fmt: skip
    assert body["started_at"] == body["finished_at"] == DateTimeField().to_representation(clock.current)
    assert body["revision_id"] == workflows.get_meta(workflow_id)["current_revision_id"]


def test_a_failing_step_stops_the_run_and_marks_it_failed(alice_api, make_item, make_workflow):
    # Given alice's notebook
    # When she runs a workflow whose second step exits 3
    body = _run(alice_api, make_item(), make_workflow(["true", "exit 3", "echo never"])).json()
    # Then the run failed at step 2 and the third step never ran
    assert (body["status"], body["reason"]) == ("failed", "Step 2 exited with 3.")
    assert [s["exit_code"] for s in body["steps"]] == [0, 3]


def test_steps_run_in_the_items_workspace(alice_api, make_item, make_workflow):
    # Given alice's notebook holding data.csv
    item = make_item()
    alice_api.put(item_url(item, "/files/data.csv"), b"a,b\n", content_type="application/octet-stream")
    # When she runs a workflow that lists the workspace
    body = _run(alice_api, item, make_workflow(["ls"])).json()
    # Then the step saw data.csv
    assert body["steps"][0]["stdout"] == "data.csv\n"


def test_the_current_revision_runs_and_switching_back_changes_what_runs(alice_api, make_item, make_workflow):
    # Given alice's workflow whose steps changed from echo first to echo second
    item, workflow_id = make_item(), make_workflow(["echo first"])
    first_revision = workflows.get_meta(workflow_id)["current_revision_id"]
    workflows.update(workflow_id, {"name": "checks", "steps": ["echo second"]}, user="alice")
    # When she runs it / Then the latest steps run
    assert _run(alice_api, item, workflow_id).json()["steps"][0]["stdout"] == "second\n"
    # When she switches back to the first revision and runs it again
    workflows.switch(workflow_id, first_revision, user="alice")
    body = _run(alice_api, item, workflow_id).json()
    # Then the first revision's steps run, and the run names that revision
    assert (body["steps"][0]["stdout"], body["revision_id"]) == ("first\n", first_revision)


def test_an_unknown_workflow_is_404_and_nothing_is_recorded(alice_api, make_item):
    # Given alice's notebook
    # When she runs a workflow that does not exist
    response = _run(alice_api, make_item(), "no-such-workflow")
    # Then it is 404 workflow_not_found and no run is recorded
    assert (response.status_code, response.json()["error"]) == (404, "workflow_not_found")
    assert not WorkflowRun.objects.exists()


def test_a_deleted_workflow_is_refused_clearly(alice_api, make_item, make_workflow):
    # Given alice's workflow, since deleted
    workflow_id = make_workflow(["true"])
    workflows.delete(workflow_id, user="alice")
    # When she runs it on a notebook
    response = _run(alice_api, make_item(), workflow_id)
    # Then it is 410 saying it was deleted, and no run is recorded
    assert (response.status_code, response.json()["error"]) == (410, "workflow_deleted")
    assert "was deleted" in response.json()["detail"]
    assert not WorkflowRun.objects.exists()


def test_a_workflow_without_steps_is_refused(alice_api, make_item, make_workflow):
    # Given alice's notebook
    # When she runs a workflow with no steps
    response = _run(alice_api, make_item(), make_workflow([]))
    # Then it is 400 workflow_empty
    assert (response.status_code, response.json()["error"]) == (400, "workflow_empty")


def test_a_blank_step_is_refused_before_anything_runs(alice_api, make_item, make_workflow):
    # Given alice's notebook
    # When she runs a workflow one of whose steps is blank
    response = _run(alice_api, make_item(), make_workflow(["echo ok", "  "]))
    # Then it is 400 invalid_workflow_step and nothing runs or is recorded
    assert (response.status_code, response.json()["error"]) == (400, "invalid_workflow_step")
    assert not WorkflowRun.objects.exists()


def test_a_quota_refusal_answers_507_and_records_nothing(alice_api, make_item, make_workflow, cpu_exhausted):
    # Given alice's cpu limit below one notebook sandbox
    # When she runs a workflow
    response = _run(alice_api, make_item(), make_workflow(["true"]))
    # Then the gate refuses it and no run is recorded
    assert (response.status_code, response.json()["error"]) == (507, "sandbox_quota_exceeded")
    assert not WorkflowRun.objects.exists()


def test_the_gate_runs_before_the_run_is_recorded(alice_api, make_item, make_workflow, monkeypatch):
    # Given the sandbox gate watched for how many runs are recorded when it runs
    seen = []
    original = lifecycle.sandbox_for_item

    def watching(**kwargs):
        seen.append(WorkflowRun.objects.count())
        return original(**kwargs)

    monkeypatch.setattr(lifecycle, "sandbox_for_item", watching)
    # When alice runs a workflow on her notebook
    _run(alice_api, make_item(), make_workflow(["true"]))
    # Then no run was recorded yet when the gate ran
    assert seen[0] == 0


def test_someone_elses_item_is_404(bob_api, make_item, make_workflow):
    # Given alice's notebook and a workflow
    # When bob runs the workflow on it
    response = _run(bob_api, make_item(created_by="alice"), make_workflow(["true"]))
    # Then it is 404 and no run is recorded
    assert response.status_code == 404
    assert not WorkflowRun.objects.exists()


def test_the_runs_of_a_workflow_on_an_item_read_newest_first(
    alice_api, make_item, make_workflow, django_assert_max_num_queries
):
    # Given three runs of alice's workflow on her notebook
    item, workflow_id = make_item(), make_workflow(["true"])
    for _ in range(3):
        _run(alice_api, item, workflow_id)
    # When she reads the workflow on the notebook
    with django_assert_max_num_queries(6):
        body = alice_api.get(item_url(item, f"/workflows/{workflow_id}")).json()
    # Then its steps come with its runs, newest first, in a bounded number of queries
    assert body["workflow"]["steps"] == ["true"]
    assert [run["id"] for run in body["runs"]] == sorted((run["id"] for run in body["runs"]), reverse=True)
    assert len(body["runs"]) == 3

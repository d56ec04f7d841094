"""Workflows act for their creator: runs, run lists and pages re-check access (issue 12.2)."""

from __future__ import annotations

import pytest

from collab.actor import Actor
from quotas.models import SandboxActivity
from tests.fixtures.items import item_url
from workspace.investigations.models import InvestigationMember
from workspace.investigations.services import investigation_create
from workspace.workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


def test_running_someone_elses_workflow_is_404_and_records_nothing(api_client_for, make_item, make_workflow):
    # Given bob's workflow and dave's own item
    workflow_id = make_workflow(["touch dave.txt"], user="bob")
    item = make_item(created_by="dave")
    # When dave runs bob's workflow on his item
    response = api_client_for("dave").post(item_url(item, f"/workflows/{workflow_id}/run"))
    # Then it is the 404 of a missing workflow and no run is recorded
    assert response.status_code == 404
    assert response.json()["error"] == "workflow_not_found"
    assert WorkflowRun.objects.count() == 0


def test_staff_running_a_workflow_on_an_item_its_creator_may_not_use_is_refused(
    settings, alice_api, make_item, make_workflow
):
    # Given dave's workflow and carol's item, and alice staff
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    workflow_id = make_workflow(["touch dave.txt"], user="dave")
    item = make_item(created_by="carol")
    # When alice runs dave's workflow on carol's item
    response = alice_api.post(item_url(item, f"/workflows/{workflow_id}/run"))
    # Then the run is refused because it would act for dave, nothing is recorded, no sandbox opened
    assert response.status_code == 403
    assert response.json()["error"] == "workflow_creator_lacks_access"
    assert WorkflowRun.objects.count() == 0
    assert SandboxActivity.objects.count() == 0


def test_staff_may_run_a_workflow_on_an_item_its_creator_may_use(settings, alice_api, make_item, make_workflow):
    # Given bob's workflow and bob's item, and alice staff
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    workflow_id = make_workflow(["echo ok"], user="bob")
    item = make_item(created_by="bob")
    # When alice runs it
    response = alice_api.post(item_url(item, f"/workflows/{workflow_id}/run"))
    # Then it runs, recording alice as the one who started it
    assert response.status_code == 201
    assert (response.json()["status"], response.json()["created_by"]) == ("succeeded", "alice")


def test_a_scheduled_run_acts_for_the_workflows_creator(scheduler_tick, make_item, make_workflow, clock):
    # Given bob's scheduled workflow on alice's investigation where bob is a member
    investigation = investigation_create(title="outage", actor=Actor("alice"), members=["bob"]).item
    make_workflow(["echo tick"], user="bob", item_id=str(investigation.pk), every_seconds=60)
    # When the scheduler runs it
    scheduler_tick()
    # Then the run is labelled with bob, not with the item's creator
    run = WorkflowRun.objects.get()
    assert (run.status, run.created_by) == ("succeeded", "bob")


def test_a_scheduled_run_whose_creator_lost_access_is_not_run_and_says_why(
    scheduler_tick, make_item, make_workflow, clock
):
    # Given bob's scheduled workflow on alice's investigation, then bob removed from it
    investigation = investigation_create(title="outage", actor=Actor("alice"), members=["bob"]).item
    make_workflow(["touch bob.txt"], user="bob", item_id=str(investigation.pk), every_seconds=60)
    InvestigationMember.objects.filter(investigation_id=investigation.pk, user_id="bob").delete()
    # When the scheduler's turn comes
    report = scheduler_tick()
    # Then nothing runs (no sandbox) and a visible not-run record names the reason
    run = WorkflowRun.objects.get()
    assert (report.started, report.not_run) == (0, 1)
    assert (run.status, run.trigger, run.created_by) == ("not_run", "scheduled", "bob")
    assert "acts for bob, who may not use item" in run.reason
    assert SandboxActivity.objects.count() == 0


def test_a_scheduled_run_whose_creator_left_the_directory_is_not_run(
    scheduler_tick, settings, make_item, make_workflow, clock
):
    # Given a scheduled workflow created by someone no longer in the directory
    item = make_item(created_by="alice")
    make_workflow(["true"], user="mallory", item_id=str(item.pk), every_seconds=60)
    # When the scheduler's turn comes
    scheduler_tick()
    # Then it is not run
    assert WorkflowRun.objects.get().status == "not_run"


def test_the_run_list_of_someone_elses_workflow_is_404(api_client_for, make_item, make_workflow):
    # Given bob's workflow and dave's item
    workflow_id = make_workflow(["true"], user="bob")
    item = make_item(created_by="dave")
    # When dave asks for its runs, as API and as page
    client = api_client_for("dave")
    api = client.get(item_url(item, f"/workflows/{workflow_id}"))
    page = client.get(item_url(item, f"/workflows/{workflow_id}"), **HTML)
    # Then both are 404
    assert (api.status_code, page.status_code) == (404, 404)


def test_the_item_page_lists_only_the_workflows_its_viewer_may_see(api_client_for, make_item, make_workflow):
    # Given an investigation of alice's with bob as member, a workflow of alice's and one of bob's
    investigation = investigation_create(title="outage", actor=Actor("alice"), members=["bob"]).item
    make_workflow(["true"], name="alice-secret-checks", user="alice")
    make_workflow(["true"], name="bob-checks", user="bob")
    # When bob opens the investigation's item page
    page = api_client_for("bob").get(item_url(investigation, "?folder="), **HTML).content.decode()
    # Then only his workflow is listed
    assert "bob-checks" in page
    assert "alice-secret-checks" not in page

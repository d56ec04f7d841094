"""The workflow pages: the list, one workflow with Run now and its run history, and the item's link."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from collab.actor import Actor
from tests.fixtures.items import item_url
from workspace.investigations.models import InvestigationMember
from workspace.investigations.services import investigation_create
from workspace.workflows.generated import workflows
from workspace.workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


def _page(client, url: str) -> str:
    response = client.get(url, **HTML)
    assert response.status_code == 200
    return response.content.decode()


# -- the list -----------------------------------------------------------------------------------


def test_the_list_shows_the_callers_workflows_and_no_one_elses(api_client_for, make_workflow):
    # Given a workflow of bob's and one of dave's
    make_workflow(["true"], name="bob-nightly", user="bob")
    make_workflow(["true"], name="dave-secret", user="dave")
    # When bob opens the workflow list
    page = _page(api_client_for("bob"), "/workflows")
    # Then he sees his own workflow and not dave's
    assert "bob-nightly" in page
    assert "dave-secret" not in page


def test_staff_see_everyones_workflows_in_the_list(settings, api_client_for, make_workflow):
    # Given alice is staff, and dave has a workflow
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    make_workflow(["true"], name="dave-nightly", user="dave")
    # When alice opens the workflow list / Then dave's workflow is on it
    assert "dave-nightly" in _page(api_client_for("alice"), "/workflows")


def test_the_list_shows_each_workflows_item_schedule_and_last_run(alice_api, make_item, make_workflow):
    # Given alice's hourly workflow on her notebook, run once
    item = make_item(title="Sales notebook")
    workflow_id = make_workflow(["echo hi"], name="hourly", item_id=str(item.pk), every_seconds=3600)
    alice_api.post(f"/workflows/{workflow_id}/run", {"item_id": item.pk})
    # When she opens the workflow list
    page = _page(alice_api, "/workflows")
    # Then its row names the item, the schedule and the last run's status
    assert "Sales notebook" in page
    assert "every hour" in page
    assert "wf-status-succeeded" in page


def test_the_list_takes_the_same_queries_for_three_workflows_and_for_a_full_page(
    alice_api, make_item, make_workflow, django_assert_max_num_queries
):
    # Given alice's 25 workflows, each on an item and run twice
    item = make_item()
    for number in range(25):
        workflow_id = make_workflow(["true"], name=f"w{number}", item_id=str(item.pk))
        for _ in range(2):
            WorkflowRun.objects.create(workflow_id=workflow_id, item=item, trigger="manual", status="succeeded")
    # When she opens the list / Then it takes a bounded number of queries, whatever the page holds
    with django_assert_max_num_queries(6):
        _page(alice_api, "/workflows")


def test_a_deleted_workflow_is_listed_under_deleted_only(alice_api, make_workflow):
    # Given alice's workflow, deleted
    workflow_id = make_workflow(["true"], name="retired-checks")
    workflows.delete(workflow_id, user="alice")
    # When she opens the current and the deleted workflows
    current, deleted = _page(alice_api, "/workflows"), _page(alice_api, "/workflows?deleted=1")
    # Then it is listed only among the deleted
    assert "retired-checks" not in current
    assert "retired-checks" in deleted


def test_the_header_links_to_the_workflows(alice_api):
    # Given alice on her home page
    # When the page renders / Then its header links to the workflow list
    assert '<a href="/workflows">Workflows</a>' in _page(alice_api, "/")


# -- one workflow: run now and the run history --------------------------------------------------


def test_run_now_runs_the_steps_and_the_history_shows_status_duration_and_output(alice_api, make_item, make_workflow):
    # Given alice's smoke workflow on her notebook
    item = make_item()
    workflow_id = make_workflow(["echo page-output"], name="smoke", item_id=str(item.pk))
    # When she presses Run now on its page
    response = alice_api.post(f"/workflows/{workflow_id}/run", {"item_id": str(item.pk)}, follow=True)
    # Then the page she lands on says it succeeded and shows the run with its duration and output
    page = response.content.decode()
    run = WorkflowRun.objects.get()
    assert f"Run #{run.number} succeeded." in page
    assert 'data-status="succeeded"' in page
    assert 'data-testid="run-duration"' in page
    assert "page-output" in page


def test_run_now_over_quota_shows_every_binding_limit_and_a_link_to_my_resources(
    per_user, fresh_memos, alice_api, make_item, make_workflow
):
    # Given alice's limits that one notebook sandbox exceeds in cpu and in memory
    per_user(cpu=0.5, memory="256M")
    item = make_item()
    workflow_id = make_workflow(["true"], item_id=str(item.pk))
    # When she presses Run now
    response = alice_api.post(f"/workflows/{workflow_id}/run", {"item_id": str(item.pk)})
    # Then the page answers 507 naming the cpu limit, listing memory too, linking to My resources; no run is recorded
    page = response.content.decode()
    assert response.status_code == 507
    assert escape("Opening a sandbox would exceed alice's cpu limit") in page
    assert escape("exceed alice's memory limit") in page
    assert 'data-testid="refusal-my-resources"' in page
    assert not WorkflowRun.objects.exists()


def test_run_now_on_someone_elses_item_is_refused_as_a_missing_item(api_client_for, make_item, make_workflow):
    # Given bob's workflow and dave's notebook
    workflow_id = make_workflow(["touch /workspace/planted"], user="bob")
    item = make_item(created_by="dave")
    # When bob presses Run now naming dave's notebook
    response = api_client_for("bob").post(f"/workflows/{workflow_id}/run", {"item_id": str(item.pk)})
    # Then it is refused as if the item did not exist, and nothing runs
    assert response.status_code == 404
    assert f"There is no item {item.pk}." in response.content.decode()
    assert not WorkflowRun.objects.exists()


def test_run_now_without_an_item_asks_for_one(alice_api, make_workflow):
    # Given alice's workflow that names no item
    workflow_id = make_workflow(["true"])
    # When she presses Run now without choosing an item
    response = alice_api.post(f"/workflows/{workflow_id}/run", {"item_id": ""})
    # Then she is asked to choose one, and nothing runs
    assert response.status_code == 400
    assert "Choose the item to run the workflow on." in response.content.decode()
    assert not WorkflowRun.objects.exists()


def test_the_page_shows_a_scheduled_run_that_was_not_run_due_to_quota(
    scheduler_tick, alice_api, make_item, make_workflow, clock, cpu_exhausted
):
    # Given a scheduled workflow whose sandbox the real gate refuses
    item = make_item()
    workflow_id = make_workflow(["true"], item_id=str(item.pk), every_seconds=60)
    # When the scheduler ticks and alice opens the workflow's page
    scheduler_tick()
    page = _page(alice_api, f"/workflows/{workflow_id}")
    # Then the page shows the run that was not run, and why
    assert 'data-status="not_run"' in page
    assert escape(f"not run due to quota: {cpu_exhausted}") in page


def test_the_workflow_page_takes_the_same_queries_however_long_its_history(
    alice_api, make_item, make_workflow, django_assert_max_num_queries
):
    # Given alice's workflow with 30 revisions and 60 runs
    item = make_item()
    workflow_id = make_workflow(["echo 0"], item_id=str(item.pk))
    for number in range(1, 30):
        workflows.update(workflow_id, {"name": "checks", "steps": [f"echo {number}"]}, user="alice")
    for _ in range(60):
        WorkflowRun.objects.create(workflow_id=workflow_id, item=item, trigger="manual", status="succeeded")
    # When she opens its page / Then it takes a bounded number of queries
    with django_assert_max_num_queries(9):
        _page(alice_api, f"/workflows/{workflow_id}")


def test_a_deleted_workflow_says_so_and_offers_no_run_or_edit(alice_api, make_workflow):
    # Given alice's workflow, since deleted
    workflow_id = make_workflow(["true"])
    workflows.delete(workflow_id, user="alice")
    # When she opens its page
    page = _page(alice_api, f"/workflows/{workflow_id}")
    # Then it says it is deleted, offers restoring it, and neither a run nor an edit
    assert 'data-testid="deleted-notice"' in page
    assert 'data-testid="restore-workflow"' in page
    assert 'data-testid="run-workflow"' not in page
    assert 'data-testid="edit-workflow"' not in page


def test_running_a_deleted_workflow_is_refused_and_records_nothing(alice_api, make_item, make_workflow):
    # Given alice's workflow on her notebook, since deleted
    item = make_item()
    workflow_id = make_workflow(["true"], item_id=str(item.pk))
    workflows.delete(workflow_id, user="alice")
    # When a Run now is posted for it
    response = alice_api.post(f"/workflows/{workflow_id}/run", {"item_id": str(item.pk)})
    # Then it is refused as deleted and nothing runs
    assert response.status_code == 410
    assert not WorkflowRun.objects.exists()


def test_deleting_from_the_page_stops_the_workflow_and_restoring_brings_it_back(alice_api, make_workflow):
    # Given alice's workflow
    workflow_id = make_workflow(["true"], name="nightly")
    # When she deletes it from its page
    alice_api.post(f"/workflows/{workflow_id}/delete")
    deleted = workflows.read(workflow_id).meta.is_deleted
    # And restores it
    alice_api.post(f"/workflows/{workflow_id}/restore")
    # Then it was deleted, and is live again
    assert deleted is True
    assert workflows.read(workflow_id).meta.is_deleted is False


# -- the item page's link -----------------------------------------------------------------------


def test_the_items_link_opens_the_workflow_ready_to_run_on_that_item(alice_api, make_item, make_workflow):
    # Given alice's notebook and a workflow of hers that names no item
    item = make_item(title="Forecasts")
    workflow_id = make_workflow(["true"])
    # When she follows the workflow's link on the notebook's page
    response = alice_api.get(item_url(item, f"/workflows/{workflow_id}"), follow=True, **HTML)
    # Then the workflow's page opens with the notebook chosen for Run now
    assert response.redirect_chain[-1][0] == f"/workflows/{workflow_id}?item={item.pk}"
    assert f'<option value="{item.pk}" selected>Forecasts (#{item.pk})</option>' in response.content.decode()


def test_the_item_page_offers_a_new_workflow_on_that_item(alice_api, make_item):
    # Given alice's notebook
    item = make_item()
    # When she opens its page / Then it links to a new workflow on it
    assert f'href="/workflows/new?item={item.pk}"' in _page(alice_api, item_url(item))


def test_an_item_the_viewer_no_longer_sees_is_named_by_id_only(api_client_for, make_workflow):
    # Given bob's workflow on alice's investigation, from which alice then removed him
    investigation = investigation_create(title="Secret outage", actor=Actor("alice"), members=["bob"]).item
    workflow_id = make_workflow(["true"], user="bob", item_id=str(investigation.pk))
    InvestigationMember.objects.filter(investigation_id=investigation.pk, user_id="bob").delete()
    bob = api_client_for("bob")
    # When bob opens the workflow list and the workflow's page
    pages = _page(bob, "/workflows") + _page(bob, f"/workflows/{workflow_id}")
    # Then the investigation's title is shown on neither, only its id
    assert "Secret outage" not in pages
    assert f"item {investigation.pk} (not found, or not yours)" in pages


def test_run_now_on_an_item_the_creator_may_not_use_is_refused_saying_so(
    settings, api_client_for, make_item, make_workflow
):
    # Given bob's workflow, and alice (staff) with a notebook of her own, which bob may not use
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    workflow_id = make_workflow(["true"], user="bob")
    item = make_item(created_by="alice")
    # When alice presses Run now on her notebook
    response = api_client_for("alice").post(f"/workflows/{workflow_id}/run", {"item_id": str(item.pk)})
    # Then it is refused (403): the run would act for bob, who may not use it; nothing runs
    assert response.status_code == 403
    assert f"acts for bob, who may not use item {item.pk}" in response.content.decode()
    assert not WorkflowRun.objects.exists()

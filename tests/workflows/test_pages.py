"""The workflow page of an item: steps, runs with their output and failure records."""

from __future__ import annotations

import pytest
from django.utils.html import escape

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


def test_the_page_shows_the_steps_and_the_runs_output(alice_api, make_item, make_workflow):
    # Given alice's notebook and her smoke workflow, run once on it
    item, workflow_id = make_item(), make_workflow(["echo page-output"], name="smoke")
    alice_api.post(f"/a/notebook/items/{item.pk}/workflows/{workflow_id}/run", format="json")
    # When she opens the workflow's page on the notebook
    page = alice_api.get(f"/a/notebook/items/{item.pk}/workflows/{workflow_id}", **HTML).content.decode()
    # Then it shows the workflow's name, the run's output and a link to its revisions
    assert "smoke" in page
    assert "page-output" in page
    assert f"/api/v1/workflow/{workflow_id}/revision-list" in page


def test_the_page_shows_a_scheduled_run_that_was_not_run_due_to_quota(
    scheduler_tick, alice_api, make_item, make_workflow, clock, cpu_exhausted
):
    # Given a scheduled workflow whose sandbox the real gate refuses
    item = make_item()
    workflow_id = make_workflow(["true"], item_id=str(item.pk), every_seconds=60)
    # When the scheduler ticks and alice opens the workflow's page
    scheduler_tick()
    page = alice_api.get(f"/a/notebook/items/{item.pk}/workflows/{workflow_id}", **HTML).content.decode()
    # Then the page shows the run that was not run, and why
    assert escape(f"not run due to quota: {cpu_exhausted}") in page


def test_an_unknown_workflow_page_is_404(alice_api, make_item):
    # Given alice's notebook
    # When she opens the page of a workflow that does not exist / Then it is 404
    assert alice_api.get(f"/a/notebook/items/{make_item().pk}/workflows/nope", **HTML).status_code == 404


def test_a_deleted_workflows_page_sends_back_to_the_item_saying_why(alice_api, make_item, make_workflow):
    from workspace.workflows.generated import workflows

    # Given alice's notebook and a workflow of hers, since deleted
    item, workflow_id = make_item(), make_workflow(["true"])
    workflows.delete(workflow_id, user="alice")
    # When she opens the workflow's page on the notebook
    response = alice_api.get(f"/a/notebook/items/{item.pk}/workflows/{workflow_id}", follow=True, **HTML)
    # Then she is sent back to the item, told the workflow was deleted and cannot run
    assert "was deleted, so it cannot run" in response.content.decode()

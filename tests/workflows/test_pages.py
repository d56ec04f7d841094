"""The workflow page of an item: steps, runs with their output and failure records."""

from __future__ import annotations

import pytest

from collab.errors import ApiError
from workspace.items.sandboxes import lifecycle

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


def test_the_page_shows_the_steps_and_the_runs_output(alice_api, make_item, make_workflow):
    item, workflow_id = make_item(), make_workflow(["echo page-output"], name="smoke")
    alice_api.post(f"/a/notebook/items/{item.pk}/workflows/{workflow_id}/run", format="json")
    page = alice_api.get(f"/a/notebook/items/{item.pk}/workflows/{workflow_id}", **HTML).content.decode()
    assert "smoke" in page
    assert "page-output" in page
    assert f"/api/v1/workflow/{workflow_id}/revision-list" in page


def test_the_page_shows_a_scheduled_run_that_was_not_run_due_to_quota(
    scheduler_tick, alice_api, make_item, make_workflow, monkeypatch, clock
):
    def refuse(**_kwargs):
        raise ApiError(status_code=507, error="sandbox_quota_exceeded", detail="limit reached")

    item = make_item()
    workflow_id = make_workflow(["true"], item_id=str(item.pk), every_seconds=60)
    monkeypatch.setattr(lifecycle, "sandbox_for_item", refuse)
    scheduler_tick()
    page = alice_api.get(f"/a/notebook/items/{item.pk}/workflows/{workflow_id}", **HTML).content.decode()
    assert "not run due to quota: limit reached" in page


def test_an_unknown_workflow_page_is_404(alice_api, make_item):
    assert alice_api.get(f"/a/notebook/items/{make_item().pk}/workflows/nope", **HTML).status_code == 404


def test_a_deleted_workflows_page_sends_back_to_the_item_saying_why(alice_api, make_item, make_workflow):
    from workspace.workflows.generated import workflows

    item, workflow_id = make_item(), make_workflow(["true"])
    workflows.delete(workflow_id, user="alice")
    response = alice_api.get(f"/a/notebook/items/{item.pk}/workflows/{workflow_id}", follow=True, **HTML)
    assert "was deleted, so it cannot run" in response.content.decode()

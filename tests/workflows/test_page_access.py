"""Every workflow page answers someone else's workflow with the site's 404 page, and changes nothing."""

from __future__ import annotations

import pytest

from crudgen.models import StoredResource, StoredRevision
from workspace.workflows.generated import workflows
from workspace.workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}

PAGES = ["/workflows/{rid}", "/workflows/{rid}/edit", "/workflows/{rid}/revisions/{rid}:1"]
ACTIONS = [
    ("/workflows/{rid}/edit", {"name": "mine now", "steps": "id", "edited_revision_id": "{rid}:1"}),
    ("/workflows/{rid}/run", {"item_id": "{item}"}),
    ("/workflows/{rid}/delete", {}),
    ("/workflows/{rid}/restore", {}),
    ("/workflows/{rid}/revisions/{rid}:1/switch", {"compared_with": "{rid}:2"}),
]


def _snapshot() -> list[object]:
    resources = list(StoredResource.objects.order_by("pk").values_list("current_revision_id", "is_deleted", "data"))
    return [*resources, StoredRevision.objects.count(), WorkflowRun.objects.count()]


@pytest.fixture
def bobs_workflow(make_item, make_workflow) -> tuple[str, int]:
    """bob's workflow on his notebook, edited once (two revisions), and dave's notebook."""
    item = make_item(created_by="bob")
    workflow_id = make_workflow(["echo one"], user="bob", item_id=str(item.pk))
    workflows.update(workflow_id, {"name": "checks", "steps": ["echo two"]}, user="bob")
    return workflow_id, make_item(created_by="dave").pk


@pytest.mark.parametrize("template", PAGES)
def test_a_stranger_gets_the_sites_404_on_each_page_of_someone_elses_workflow(api_client_for, bobs_workflow, template):
    # Given bob's workflow
    workflow_id, _daves_item = bobs_workflow
    # When dave opens one of its pages
    response = api_client_for("dave").get(template.format(rid=workflow_id), **HTML)
    # Then it is the site's own 404 page
    assert response.status_code == 404
    assert "404.html" in [template.name for template in response.templates]


@pytest.mark.parametrize(("template", "form"), ACTIONS)
def test_a_stranger_gets_404_on_each_action_on_someone_elses_workflow_and_nothing_changes(
    api_client_for, bobs_workflow, template, form
):
    # Given bob's workflow, and dave's notebook to run it on
    workflow_id, daves_item = bobs_workflow
    before = _snapshot()
    # When dave posts one of its actions
    filled = {key: value.format(rid=workflow_id, item=daves_item) for key, value in form.items()}
    response = api_client_for("dave").post(template.format(rid=workflow_id), filled, **HTML)
    # Then it is the 404 of a missing workflow, and nothing is stored or run
    assert response.status_code == 404
    assert _snapshot() == before


def test_staff_open_someone_elses_workflow(settings, api_client_for, bobs_workflow):
    # Given alice is staff, and bob has a workflow
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    workflow_id, _daves_item = bobs_workflow
    # When alice opens it / Then she sees it, as on the API
    assert api_client_for("alice").get(f"/workflows/{workflow_id}", **HTML).status_code == 200

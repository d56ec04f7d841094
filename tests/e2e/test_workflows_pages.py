"""Browser: run a workflow on an item and see its output; switch back to an earlier revision."""

from __future__ import annotations

import pytest

from workspace.items import services
from workspace.items.access import app_or_404
from workspace.workflows.generated import workflows

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def private_workspaces(settings, tmp_path):
    settings.WORKSPACE_VAR_DIR = tmp_path / "var"
    settings.WORKSPACE_CGROUP_ROOT = str(tmp_path / "cgroup")
    settings.WORKSPACE_CGROUP_DRIVER = "prlimit"


def test_running_a_workflow_shows_its_output(page_as):
    # Given alice's notebook and her smoke workflow, whose one step echoes smoke-ok
    item = services.item_create(app=app_or_404("notebook"), title="Nightly", user_id="alice")
    workflows.create({"name": "smoke", "steps": ["echo smoke-ok"]}, user="alice")
    # When she picks the workflow on the item page and runs it
    page = page_as("alice")
    page.goto(f"/a/notebook/items/{item.pk}")
    page.click("[data-testid=workflows] >> text=smoke")
    page.click("[data-testid=run-workflow]")
    # Then its output shows smoke-ok and the run is marked succeeded
    page.locator("[data-testid=run-output]").filter(has_text="smoke-ok").wait_for()
    assert page.locator("[data-testid=run]").first.get_attribute("data-status") == "succeeded"


def test_switching_back_restores_the_earlier_steps(page_as):
    # Given alice's workflow whose steps she changed from echo first to echo second, open on her notebook
    item = services.item_create(app=app_or_404("notebook"), title="Nightly", user_id="alice")
    workflow_id = workflows.create({"name": "smoke", "steps": ["echo first"]}, user="alice")["resource_id"]
    workflows.update(workflow_id, {"name": "smoke", "steps": ["echo second"]}, user="alice")
    page = page_as("alice")
    page.goto(f"/a/notebook/items/{item.pk}/workflows/{workflow_id}")
    # Then the page shows the latest steps
    assert page.locator("[data-testid=steps]").inner_text().strip() == "echo second"
    # When she switches back to the earlier revision
    page.click("[data-testid=switch-back]")
    # Then the earlier steps show again
    page.locator("[data-testid=steps]").filter(has_text="echo first").wait_for()

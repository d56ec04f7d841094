"""Browser, at a desktop width and at 390 px: a workflow created from the form (a refused save keeps
what was typed), run now with its output, edited, compared with an earlier revision and switched
back after confirming; Run now over quota; the list reached from the header."""

from __future__ import annotations

import pytest

from tests.e2e.browser import (
    PHONE,
    assert_accessible,
    assert_every_action_on_screen,
    assert_no_sideways_scroll,
    screenshot,
)
from workspace.workflows.generated import workflows

pytestmark = pytest.mark.django_db(transaction=True)


def _checked(page, name: str) -> None:
    """The page as it stands: no sideways scroll, no serious accessibility violation, a screenshot."""
    assert_no_sideways_scroll(page)
    assert_accessible(page)
    screenshot(page, name)


def test_a_workflow_made_in_the_form_runs_and_shows_its_output(deployment, page_as, make_notebook, viewport):
    # Given alice on her notebook's page
    deployment("")
    notebook = make_notebook("Forecasts", owner="alice")
    page = page_as("alice", viewport=viewport)
    page.goto(f"/a/notebook/items/{notebook.pk}")
    # When she starts a new workflow from it
    page.click("[data-testid=new-item-workflow]")
    # Then the form has the notebook chosen
    assert page.input_value("#wf-item") == str(notebook.pk)
    # When she gives it two steps, every 30 seconds
    page.fill("#wf-name", "Nightly report")
    page.fill("#wf-step-1", "echo first-step")
    page.click("[data-testid=add-step]")
    page.fill("#wf-step-2", "echo second-step")
    page.fill("#wf-every", "30")
    page.select_option("#wf-every-unit", "seconds")
    page.click("[data-testid=save-workflow]")
    # Then the save is refused saying why, with everything she typed still there
    summary = page.locator("#error-summary")
    assert "Schedule: must be between 60 and 2678400 seconds" in summary.inner_text()
    assert page.evaluate("document.activeElement.id") == "error-summary"
    assert [page.input_value("#wf-step-1"), page.input_value("#wf-step-2")] == ["echo first-step", "echo second-step"]
    assert page.input_value("#wf-name") == "Nightly report"
    _checked(page, "workflow-form-refused")
    # When she asks for every 2 hours instead and saves
    page.fill("#wf-every", "2")
    page.select_option("#wf-every-unit", "hours")
    page.click("[data-testid=save-workflow]")
    # Then the workflow's page shows its steps and schedule
    page.wait_for_selector("text=Created Nightly report.")
    assert page.locator("[data-testid=steps] li").all_inner_texts() == ["echo first-step", "echo second-step"]
    assert "Runs every 2 hours on its item." in page.locator("[data-testid=workflow-schedule]").inner_text()
    # When she presses Run now
    page.click("[data-testid=run-workflow]")
    # Then the newest run succeeded, with each step's output and how long it took
    run = page.locator("[data-testid=run]").first
    run.locator("[data-testid=run-output]").filter(has_text="second-step").wait_for()
    assert run.get_attribute("data-status") == "succeeded"
    assert run.locator("[data-testid=run-duration]").inner_text().endswith("s")
    _checked(page, "workflow-after-run")


def test_the_step_editor_adds_reorders_and_removes_steps(deployment, page_as, viewport):
    # Given alice on the new-workflow form
    deployment("")
    page = page_as("alice", viewport=viewport)
    page.goto("/workflows/new")
    page.fill("#wf-name", "Ordered")
    # When she types three steps, moves the third up and removes the first
    page.fill("#wf-step-1", "echo a")
    page.click("[data-testid=add-step]")
    page.fill("#wf-step-2", "echo b")
    page.click("[data-testid=add-step]")
    page.fill("#wf-step-3", "echo c")
    page.get_by_role("button", name="Move step 3 up").click()
    page.get_by_role("button", name="Remove step 1").click()
    _checked(page, "workflow-step-editor")
    page.click("[data-testid=save-workflow]")
    # Then the workflow holds the remaining steps in their new order
    page.wait_for_selector("text=Created Ordered.")
    assert page.locator("[data-testid=steps] li").all_inner_texts() == ["echo c", "echo b"]


def test_an_edit_is_compared_with_the_earlier_revision_and_switching_back_asks_first(
    deployment, page_as, make_notebook, viewport
):
    # Given alice's workflow whose first revision echoes first
    deployment("")
    workflow_id = workflows.create({"name": "smoke", "steps": ["echo first", "echo shared"]}, user="alice")[
        "resource_id"
    ]
    page = page_as("alice", viewport=viewport)
    page.goto(f"/workflows/{workflow_id}")
    # When she edits its first step to echo second
    page.click("[data-testid=edit-workflow]")
    page.fill("#wf-step-1", "echo second")
    page.click("[data-testid=save-workflow]")
    # Then she is told the revision, and the history lists both whole revision ids
    page.wait_for_selector(f"text=Saved as revision {workflow_id}:2.")
    ids = page.locator("[data-testid=revision-id]").all_inner_texts()
    assert ids == [f"{workflow_id}:2", f"{workflow_id}:1"]
    _checked(page, "workflow-revisions")
    # When she opens the comparison of the first revision
    page.click("[data-testid=compare-revision]")
    # Then it shows the step the switch would take away and the one it would bring back, and asks first
    lines = page.locator("[data-testid=step-diff] li")
    lines.first.wait_for()  # `all()` reads what is there now: the comparison may still be loading
    marks = [(line.get_attribute("data-mark"), line.locator("code").inner_text()) for line in lines.all()]
    assert marks == [("-", "echo second"), ("+", "echo first"), (" ", "echo shared")]
    assert page.locator("#switch-title").inner_text() == "Switch back to this revision?"
    _checked(page, "workflow-revision-compare")
    # When she confirms
    page.click("[data-testid=confirm-switch]")
    # Then the first revision's steps are current again
    page.wait_for_selector(f"text=Switched back to revision {workflow_id}:1.")
    assert page.locator("[data-testid=steps] li").all_inner_texts() == ["echo first", "echo shared"]


def test_run_now_over_quota_says_every_limit_and_links_to_my_resources(
    deployment, fresh_memos, page_as, make_notebook, viewport
):
    # Given alice's limits that one notebook sandbox exceeds in cpu and in memory, and her workflow on a notebook
    deployment('[resources.per_user]\ncpu = 0.5\nmemory = "256M"\n')
    notebook = make_notebook("Forecasts", owner="alice")
    workflow_id = workflows.create({"name": "smoke", "steps": ["true"], "item_id": str(notebook.pk)}, user="alice")[
        "resource_id"
    ]
    page = page_as("alice", viewport=viewport)
    page.goto(f"/workflows/{workflow_id}")
    # When she presses Run now
    page.click("[data-testid=run-workflow]")
    # Then the refusal names the cpu limit, lists the memory limit too, and links to My resources
    refusal = page.locator("[data-testid=refusal]")
    assert "exceed alice's cpu limit" in refusal.inner_text()
    assert "exceed alice's memory limit" in page.locator("[data-testid=refusal-also]").inner_text()
    _checked(page, "workflow-run-refused")
    page.click("[data-testid=refusal-my-resources]")
    page.wait_for_url("**/my-resources")


def test_the_header_leads_to_the_workflow_list(deployment, page_as, make_notebook, viewport):
    # Given two workflows of alice's, one hourly on her notebook
    deployment("")
    notebook = make_notebook("Forecasts", owner="alice")
    workflows.create(
        {"name": "Hourly", "steps": ["true"], "item_id": str(notebook.pk), "every_seconds": 3600}, user="alice"
    )
    workflows.create({"name": "By hand", "steps": ["true"]}, user="alice")
    page = page_as("alice", viewport=viewport)
    page.goto("/")
    # When she follows Workflows in the header (behind the Menu button on a phone)
    if page.locator("[data-testid=menu-toggle]").is_visible():
        page.click("[data-testid=menu-toggle]")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Workflows").click()
    # Then the list shows both, the hourly one on its notebook
    rows = page.locator("[data-testid=workflow-row]")
    rows.first.wait_for()
    assert rows.count() == 2
    hourly = rows.filter(has_text="Hourly")
    assert "Forecasts" in hourly.inner_text()
    assert "every hour" in hourly.inner_text()
    _checked(page, "workflows-list")


def test_a_runs_output_wraps_inside_a_phone_screen(deployment, page_as, make_notebook):
    # Given alice's workflow on her notebook whose step prints one line far wider than a phone
    deployment("")
    notebook = make_notebook("Forecasts", owner="alice")
    steps = ["printf 'wide-%.0s' $(seq 1 80)"]
    workflow_id = workflows.create({"name": "Wide", "steps": steps, "item_id": str(notebook.pk)}, user="alice")[
        "resource_id"
    ]
    page = page_as("alice", viewport=PHONE)
    page.goto(f"/workflows/{workflow_id}")
    # When she runs it on her phone (390 px)
    page.click("[data-testid=run-workflow]")
    output = page.locator("[data-testid=run]").first.locator("[data-testid=run-output]")
    output.wait_for()
    # Then the output box lies inside the screen and shows the whole line: nothing in it is cut at its right edge
    box = output.bounding_box()
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= PHONE["width"]
    assert output.evaluate("node => node.scrollWidth - node.clientWidth") <= 0
    assert output.inner_text().replace("\n", "") == "wide-" * 80
    assert_every_action_on_screen(page)
    screenshot(page, "workflow-run-output-phone")

"""Browser: a new visitor's first minutes in the demo and the small things they noticed
(issues 30.5 and 30.8). Nothing is in use before they act, their first commands in two notebooks
both run, the footer says why Admin signs in on its own, usage meters turn red at the limit, sizes
read one way, the home page's unread count follows the bell, and runs are numbered per workflow."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from django.core.management import call_command

from collab.actor import Actor
from tests.e2e.browser import PHONE, assert_accessible, assert_every_action_on_screen, screenshot, wait_until_ended
from tests.factories import make_notification
from workspace.items.models import Item
from workspace.workflows.scheduler import schedules_enqueue_due

pytestmark = pytest.mark.django_db(transaction=True)
# The demo's limits (workspace/demo.toml).
DEMO_LIMITS = '[resources.per_user]\ncount = 3\ncpu = 3\nmemory = "1536M"\ndisk = "2G"\n'


@pytest.fixture
def demo(settings: Any, deployment) -> None:
    """The demo loaded as `make run` loads it (alice staff), its worker's first scheduler pass done."""
    deployment(DEMO_LIMITS)
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    settings.TASKS = {
        "default": {**settings.TASKS["default"], "BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}
    }
    call_command("load_demo", stdout=io.StringIO())
    schedules_enqueue_due()


def _run(page, command: str) -> None:
    page.fill("[data-testid=exec-command]", command)
    page.press("[data-testid=exec-command]", "Enter")


def test_a_new_visitor_starts_with_nothing_in_use_and_both_first_commands_run(demo, page_as, viewport):
    page = page_as("alice", viewport=viewport)
    # Given the demo just started / When alice opens the home page
    page.goto("/")
    # Then none of her sandboxes, cores or memory is in use
    resources = page.locator("[data-testid=home-resources]").inner_text()
    assert "0 of 3" in resources
    assert "0 bytes of 1.5 GB" in resources
    screenshot(page, "first-visit-home")
    # When she runs a command in each of her two notebooks
    for title in ("Scratch notebook", "Data exploration"):
        page.goto(f"/a/notebook/items/{Item.objects.get(created_by='alice', title=title).pk}")
        _run(page, "echo hello")
        status = page.locator("[data-testid=exec-block]").first.locator("[data-testid=exec-status]")
        wait_until_ended(page, status)
        assert status.get_attribute("data-state") == "ok", page.locator("[data-testid=exec-output]").inner_text()
    # Then both ran, and My resources counts her two sandboxes
    page.goto("/my-resources")
    assert page.locator("[data-testid=live-sandboxes] tbody tr").count() == 2


def test_the_footer_says_why_admin_asks_staff_to_sign_in(demo, page_as, viewport):
    # Given the demo, where alice is staff / When she looks at the foot of any page
    page = page_as("alice", viewport=viewport)
    page.goto("/")
    # Then the Admin link says it signs in on its own, with her demo password
    note = page.locator("[data-testid=admin-sign-in-note]").inner_text()
    assert "not the “Acting as” switch" in note
    assert "alice’s password is “demo”" in note
    assert_accessible(page)


def test_a_usage_meter_at_its_limit_turns_red_and_sizes_read_one_way(deployment, page_as, make_notebook):
    # Given bob allowed one sandbox, with one live (his notebook's, 512M)
    deployment('[resources.per_user]\ncount = 1\nmemory = "512M"\ndisk = "2G"\n')
    item = make_notebook("Only one")
    page = page_as("bob", viewport=PHONE)
    page.goto(f"/a/notebook/items/{item.pk}")
    _run(page, "head -c 3000000 /dev/zero > blob")
    page.locator("[data-testid=exec-status]", has_text="exit 0").wait_for()
    # When he opens My resources
    page.goto("/my-resources")
    # Then the Sandboxes and Memory meters are full and in the browser's "bad" region (red), the
    # Disk one is not (cores have no limit here, so no meter)
    regions = page.locator("meter").evaluate_all(
        "meters => meters.map(m => [m.value, m.value > m.high && m.optimum < m.low])"
    )
    assert regions == [[100, True], [100, True], [0, False]]
    # Then every size on the page reads in the one format ("512 MB"), never "512M" or "512.0 MB"
    text = page.locator("main").inner_text()
    assert "512 MB" in text
    assert not re.search(r"\b\d+(\.\d+)?[KMGT]\b|\d\.0 [KMGT]B", text), text
    assert_every_action_on_screen(page)
    screenshot(page, "meters-at-limit")


def test_the_home_pages_unread_count_follows_the_bell(page_as, viewport):
    # Given alice with two unread notifications, on her home page (its clock under the test's hand)
    make_notification(recipient="alice", title="first")
    make_notification(recipient="alice", title="second")
    page = page_as("alice", viewport=viewport)
    page.clock.install()
    page.goto("/")
    assert page.locator("[data-testid=home-unread-link]").inner_text() == "All unread (2)"
    # When a third arrives and the bell polls again, half a minute later
    make_notification(recipient="alice", title="third")
    page.clock.run_for(31_000)
    # Then the bell and the home page's count both say three
    page.locator("[data-testid=bell-count]", has_text="3").wait_for()
    page.locator("[data-testid=home-unread-link]", has_text="All unread (3)").wait_for()


def test_a_new_workflows_first_run_is_run_1(page_as, make_notebook, viewport):
    # Given bob's notebook with one workflow that has run twice, and a second workflow
    from tests.factories import make_workflow
    from workspace.items.access import app_or_404
    from workspace.workflows import services

    item = make_notebook("Jobs")
    older = make_workflow(["true"], name="older", item_id=str(item.pk), user="bob")
    newer = make_workflow(["echo first"], name="newer", item_id=str(item.pk), user="bob")
    for _ in range(2):
        services.workflow_run(workflow_id=older, item=item, app=app_or_404("notebook"), actor=Actor("bob"))
    # When bob runs the second workflow from its page
    page = page_as("bob", viewport=viewport)
    page.goto(f"/workflows/{newer}?item={item.pk}")
    page.click("[data-testid=run-workflow]")
    # Then its run is "Run #1", not the third run of the service
    page.wait_for_selector("text=Run #1 succeeded.")
    assert page.locator("[data-testid=run]").first.locator(".wf-run-title").inner_text() == "Run #1"
    assert_accessible(page)

"""Browser: the item page's terminal shows a running command, keeps commands in order, streams,
says when a command timed out, keeps the Sandbox card current and makes a 507 readable."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def one_sandbox_of_one_core_each(deployment) -> None:
    deployment("[sandbox]\nexec_timeout = '2s'\n[resources.per_user]\ncount = 1\ncpu = 1\n")


def _run(page, command: str) -> None:
    page.fill("[data-testid=exec-command]", command)
    page.press("[data-testid=exec-command]", "Enter")


def test_a_running_command_shows_it_and_later_commands_wait_their_turn(page_as, make_notebook):
    # Given bob's notebook, before any sandbox is open
    item = make_notebook("Terminal")
    page = page_as("bob")
    page.goto(f"/a/notebook/items/{item.pk}")
    page.wait_for_selector("[data-testid=no-sandbox]")
    # When he runs a slow command and a quick one straight after
    _run(page, "echo first; sleep 1; echo first-done")
    _run(page, "echo second")
    blocks = page.locator("[data-testid=exec-block]")
    # Then the first shows it is running while the second waits, and outputs stay in their blocks
    blocks.nth(0).locator("[data-testid=exec-status]", has_text="running").wait_for()
    assert blocks.nth(1).locator("[data-testid=exec-status]").inner_text() == "queued"
    blocks.nth(1).filter(has_text="[exit 0]").wait_for()
    assert "first\nfirst-done\n[exit 0]" in blocks.nth(0).inner_text()
    assert "second" in blocks.nth(1).inner_text()
    assert "second" not in blocks.nth(0).inner_text()
    # And the Sandbox card now shows the sandbox the run opened
    page.wait_for_selector("[data-testid=sandbox-id]")


def test_a_timed_out_command_says_so(page_as, make_notebook):
    # Given bob's notebook in a deployment whose commands time out after two seconds
    item = make_notebook("Slow")
    page = page_as("bob")
    page.goto(f"/a/notebook/items/{item.pk}")
    # When he runs a command that prints and then sleeps for thirty
    _run(page, "echo waiting; sleep 30")
    # Then its block says it timed out and keeps what it printed
    block = page.locator("[data-testid=exec-block]").first
    block.filter(has_text="timed out").wait_for()
    assert "waiting" in block.inner_text()
    assert block.locator("[data-testid=exec-status]").inner_text() == "timed out"


def test_a_quota_refusal_is_readable_lists_every_limit_and_links_to_my_resources(page_as, make_notebook):
    # Given bob already runs his one sandbox of 1 core
    first, second = make_notebook("First"), make_notebook("Second")
    page = page_as("bob")
    page.goto(f"/a/notebook/items/{first.pk}")
    _run(page, "true")
    page.locator("[data-testid=exec-block]").filter(has_text="[exit 0]").wait_for()
    # When he runs a command in another notebook
    page.goto(f"/a/notebook/items/{second.pk}")
    _run(page, "true")
    refusal = page.locator("[data-testid=exec-output] [data-testid=refusal]")
    refusal.wait_for()
    # Then the refusal names the count and, below it, the cpu limit, in dark text on its light box
    assert "sandboxes limit" in refusal.inner_text()
    assert "cpu" in refusal.locator(".refusal-also").inner_text()
    color = refusal.evaluate("node => getComputedStyle(node).color")
    assert color == "rgb(59, 29, 0)"
    assert refusal.get_by_role("link", name="Free capacity on My resources").is_visible()

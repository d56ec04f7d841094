"""Browser: fill a person's sandbox quota, see the 507 on the item page, close a sandbox on My resources, succeed."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def one_sandbox_each(deployment) -> None:
    deployment("[resources.per_user]\ncount = 1\n")


def _run(page, command: str) -> None:
    page.fill("[data-testid=exec-command]", command)
    page.click("[data-testid=exec-run]")


def test_a_full_quota_is_refused_with_a_way_out_and_closing_a_sandbox_frees_it(page_as, make_notebook):
    # Given bob's two notebooks and a deployment that allows one sandbox each
    first, second = make_notebook("First notebook"), make_notebook("Second notebook")
    page = page_as("bob")

    # When he runs a command in the first, then in the second
    page.goto(f"/a/notebook/items/{first.pk}")
    _run(page, "echo one")
    page.locator("[data-testid=exec-output]").filter(has_text="[exit 0]").wait_for()

    page.goto(f"/a/notebook/items/{second.pk}")
    _run(page, "echo two")
    # Then the second is refused naming the sandboxes limit, with a link to My resources
    refusal = page.locator("[data-testid=exec-output] [data-testid=refusal]")
    refusal.wait_for()
    assert "sandboxes limit" in refusal.inner_text()
    refusal.get_by_role("link", name="Free capacity on My resources").click()

    # When he follows the link and closes the first notebook's sandbox there
    page.wait_for_url("**/my-resources")
    live = page.locator(f"[data-testid=live-{first.pk}]")
    # Then the page listed it and now shows no live sandbox
    assert "First notebook" in live.inner_text()
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f"[data-testid=close-{first.pk}]")
    page.wait_for_selector("text=The sandbox is shut down.")
    page.wait_for_selector("[data-testid=no-live]")

    # When he runs the command in the second notebook again
    page.goto(f"/a/notebook/items/{second.pk}")
    _run(page, "echo two")
    # Then it runs
    output = page.locator("[data-testid=exec-output]")
    output.filter(has_text="[exit 0]").wait_for()
    assert "two" in output.inner_text()

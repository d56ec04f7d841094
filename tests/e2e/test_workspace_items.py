"""Browser: create a notebook item, write a file, run `ls` in the terminal and see the file."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def private_workspaces(settings, tmp_path):
    settings.WORKSPACE_VAR_DIR = tmp_path / "var"
    settings.WORKSPACE_CGROUP_ROOT = str(tmp_path / "cgroup")
    settings.WORKSPACE_CGROUP_DRIVER = "prlimit"


def test_create_an_item_write_a_file_and_list_it_in_the_terminal(page_as):
    # Given alice on the notebook list
    page = page_as("alice")
    page.goto("/a/notebook/items")
    # When she creates a notebook, writes a file in it and runs ls in its terminal
    page.fill("#item-title", "Browser notebook")
    page.click("[data-testid=create-item] button[type=submit]")
    page.wait_for_selector("text=Browser notebook")

    page.fill("#new-file-path", "hello-from-browser.txt")
    page.click("[data-testid=new-file] button[type=submit]")
    page.fill("#file-content", "written in chromium\n")
    page.click("[data-testid=save-file]")
    page.wait_for_selector("[data-testid=files] >> text=hello-from-browser.txt")

    page.fill("[data-testid=exec-command]", "ls")
    page.click("[data-testid=exec-run]")
    # Then the output lists the file
    output = page.locator("[data-testid=exec-output]")
    output.filter(has_text="[exit 0]").wait_for()
    assert "hello-from-browser.txt" in output.inner_text()

    # When she reloads the page and closes the sandbox, agreeing when asked
    page.reload()
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-testid=close-sandbox]")
    # Then the page shows no sandbox, and says it shut it down
    page.wait_for_selector("[data-testid=no-sandbox]")
    page.wait_for_selector("[data-testid=sandbox-closed]")

"""Browser: rename, new folder and delete from the item page; a refused save keeps the text."""

from __future__ import annotations

import pytest

from workspace.items.filestore import workspace_dir

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def small_workspaces(deployment) -> None:
    deployment('[sandbox]\nworkspace_quota = "4K"\n')


def test_files_are_renamed_foldered_and_deleted_from_the_item_page(page_as, make_notebook):
    # Given bob's item with one file
    item = make_notebook(files={"draft.txt": b"text"})
    page = page_as("bob")
    page.goto(f"/a/notebook/items/{item.pk}")
    # When he renames it, makes a folder and deletes the file
    row = page.locator("[data-testid=file-row][data-path='draft.txt']")
    row.locator("input[name=target]").fill("final.txt")
    row.get_by_role("button", name="Rename").click()
    page.wait_for_selector("[data-testid=file-row][data-path='final.txt']")
    page.fill("#new-folder-path", "data")
    page.get_by_role("button", name="Create folder").click()
    page.wait_for_selector("[data-testid=file-row][data-path='data']")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("[data-testid=file-row][data-path='final.txt']").get_by_role("button", name="Delete final.txt").click()
    page.wait_for_selector("text=Deleted final.txt.")
    # Then the workspace holds just the folder
    assert [p.name for p in workspace_dir(item.pk).iterdir()] == ["data"]


def test_a_save_over_the_limit_keeps_what_was_typed(page_as, make_notebook):
    # Given bob's notebook in a deployment whose workspaces hold 4K, open on the editor of notes.txt
    item = make_notebook()
    page = page_as("bob")
    page.goto(f"/a/notebook/items/{item.pk}/files/notes.txt")
    # When he types about 7K of notes and saves
    typed = "long line of notes\n" * 400
    page.fill("#file-content", typed)
    page.click("[data-testid=save-file]")
    # Then the page shows the refusal naming the workspace disk limit
    refusal = page.locator("[data-testid=refusal]")
    refusal.wait_for()
    assert "workspace disk limit" in refusal.inner_text()
    # Then the editor still holds everything he typed
    assert page.input_value("#file-content") == typed

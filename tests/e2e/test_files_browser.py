"""Browser, at a desktop width and at 390 px: rename, new folder and delete from the item page; a
refused save keeps the text and names every limit that bound; a refused rename keeps the name typed
and the item page's address; folders open one at a time (issue 30.7)."""

from __future__ import annotations

import pytest

from tests.e2e.browser import assert_accessible, assert_no_sideways_scroll, open_file_box, screenshot
from workspace.sandboxes.filestore import workspace_dir

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def small_workspaces(deployment) -> None:
    deployment('[sandbox]\nworkspace_quota = "4K"\n[resources.per_user]\ndisk = "4K"\n')


def _row(page, path: str):
    return page.locator(f"[data-testid=file-row][data-path='{path}']")


def test_files_are_renamed_foldered_and_deleted_from_the_item_page(page_as, make_notebook, viewport):
    # Given bob's item with a file in a folder and one at the top
    item = make_notebook(files={"draft.txt": b"text", "notes/todo.md": b"- ship"})
    page = page_as("bob", viewport=viewport)
    page.goto(f"/a/notebook/items/{item.pk}")
    assert_no_sideways_scroll(page)
    # When he opens Rename on draft.txt
    rename = open_file_box(_row(page, "draft.txt"), "Rename")
    # Then the name is ready to type over (its field has the focus), and the page is still
    # readable and within the screen
    assert rename.input_value() == "draft.txt"
    assert_no_sideways_scroll(page)
    assert_accessible(page)
    screenshot(page, "files-rename-open")
    # When he renames it, makes a folder and deletes the renamed file
    rename.fill("final.txt")
    _row(page, "draft.txt").get_by_role("button", name="Save").click()
    _row(page, "final.txt").wait_for()
    page.fill("#new-folder-path", "data/raw")
    page.get_by_role("button", name="Create folder").click()
    _row(page, "data").wait_for()
    page.once("dialog", lambda dialog: dialog.accept())
    _row(page, "final.txt").get_by_role("button", name="Delete final.txt").click()
    page.wait_for_selector("text=Deleted final.txt.")
    # Then the workspace holds the folders and the untouched file, and the page still fits the screen
    assert sorted(p.relative_to(workspace_dir(item.pk)).as_posix() for p in workspace_dir(item.pk).rglob("*")) == [
        "data",
        "data/raw",
        "notes",
        "notes/todo.md",
    ]
    assert_no_sideways_scroll(page)
    assert_accessible(page)
    screenshot(page, "files-after-changes")


def test_a_cancelled_delete_sends_nothing(page_as, make_notebook, viewport):
    # Given bob's item with one file, and a record of what his browser posts
    item = make_notebook(files={"keep.txt": b"keep"})
    page = page_as("bob", viewport=viewport)
    page.goto(f"/a/notebook/items/{item.pk}")
    posted: list[str] = []
    page.on("request", lambda request: posted.append(request.url) if request.method == "POST" else None)
    # When he presses Delete, cancels the question, then makes a folder
    page.once("dialog", lambda dialog: dialog.dismiss())
    _row(page, "keep.txt").get_by_role("button", name="Delete keep.txt").click()
    page.fill("#new-folder-path", "after")
    page.get_by_role("button", name="Create folder").click()
    _row(page, "after").wait_for()
    # Then only the folder was posted, and the file is still listed and stored
    assert [url.rsplit("/", 1)[1] for url in posted] == ["files:mkdir"]
    assert _row(page, "keep.txt").is_visible()
    assert (workspace_dir(item.pk) / "keep.txt").read_bytes() == b"keep"


def test_a_refused_rename_keeps_the_typed_name_in_the_open_box(page_as, make_notebook, viewport):
    # Given bob's item with a.txt and b.txt
    item = make_notebook(files={"a.txt": b"a", "b.txt": b"b"})
    page = page_as("bob", viewport=viewport)
    page.goto(f"/a/notebook/items/{item.pk}")
    # When he renames a.txt to b.txt
    open_file_box(_row(page, "a.txt"), "Rename")
    _row(page, "a.txt").get_by_label("New path for a.txt").fill("b.txt")
    _row(page, "a.txt").get_by_role("button", name="Save").click()
    # Then the refusal says b.txt exists, and the box is still open holding b.txt
    refusal = page.locator("[data-testid=files-card] [data-testid=refusal]")
    refusal.wait_for()
    assert "already exists" in refusal.inner_text()
    assert _row(page, "a.txt").get_by_label("New path for a.txt").input_value() == "b.txt"
    # Then the address bar shows the item page, not the form's `files:move`
    assert page.url.split("#")[0].endswith(f"/a/notebook/items/{item.pk}")
    assert_no_sideways_scroll(page)
    assert_accessible(page)
    screenshot(page, "files-rename-refused")


def test_a_save_over_the_limits_keeps_what_was_typed_and_names_every_limit(page_as, make_notebook, viewport):
    # Given bob's notebook in a deployment whose workspaces and per-user disk hold 4K, on the editor of notes.txt
    item = make_notebook()
    page = page_as("bob", viewport=viewport)
    page.goto(f"/a/notebook/items/{item.pk}/files/notes.txt")
    # When he types about 7K of notes and saves
    typed = "long line of notes\n" * 400
    page.fill("#file-content", typed)
    page.click("[data-testid=save-file]")
    # Then the page names the workspace disk limit and, below it, his own disk limit, and links to My resources
    refusal = page.locator("[data-testid=refusal]")
    refusal.wait_for()
    assert "workspace disk limit" in refusal.inner_text()
    # (the refusal names the notebook by its title, and the limit's size)
    assert "the workspace of “Notebook”" in refusal.inner_text()
    assert "limit of 4 KB" in refusal.inner_text()
    assert "bob's per-user disk limit" in refusal.locator(".refusal-also").inner_text()
    assert refusal.get_by_role("link", name="Free capacity on My resources").is_visible()
    # Then the editor still holds everything he typed
    assert page.input_value("#file-content") == typed
    assert_no_sideways_scroll(page)
    assert_accessible(page)
    screenshot(page, "files-save-refused")


def test_folders_open_one_at_a_time_and_lead_back_up(page_as, make_notebook, viewport):
    # Given bob's notebook with files two folders down
    item = make_notebook(files={"top.txt": b"t", "data/raw/a.csv": b"1", "data/b.csv": b"2"})
    page = page_as("bob", viewport=viewport)
    page.goto(f"/a/notebook/items/{item.pk}")
    # Then the workspace lists its folder first and its own file, not what lies inside the folder
    assert page.locator("[data-testid=file-row]").evaluate_all("rows => rows.map(r => r.dataset.path)") == [
        "data",
        "top.txt",
    ]
    # When he opens data, then raw
    _row(page, "data").get_by_role("link", name="data/").click()
    _row(page, "data/raw").get_by_role("link", name="raw/").click()
    # Then he sees a.csv, where he is, and the way back
    _row(page, "data/raw/a.csv").wait_for()
    crumbs = page.locator("[data-testid=folder-crumbs]")
    assert crumbs.inner_text().split() == ["workspace", "/", "data", "/", "raw"]
    assert_no_sideways_scroll(page)
    assert_accessible(page)
    screenshot(page, "files-folder-open")
    # When he renames a.csv there / Then he stays in data/raw
    open_file_box(_row(page, "data/raw/a.csv"), "Rename")
    _row(page, "data/raw/a.csv").get_by_label("New path for data/raw/a.csv").fill("data/raw/c.csv")
    _row(page, "data/raw/a.csv").get_by_role("button", name="Save").click()
    _row(page, "data/raw/c.csv").wait_for()
    # When he goes back up to the workspace / Then its list is there again
    crumbs.get_by_role("link", name="workspace").click()
    _row(page, "top.txt").wait_for()

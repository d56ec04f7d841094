"""Browser, at a desktop width and at 390 px: after an upload, a new folder or opening a folder the
item page comes back at its Files card, with the Files heading and what just happened below the
sticky header and on the screen (issue 47.7)."""

from __future__ import annotations

import pytest

from tests.e2e.browser import assert_accessible, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def _assert_below_header_on_screen(page, target) -> None:
    """`target` is drawn whole between the bottom of the sticky header and the bottom of the screen."""
    header = page.locator(".site-header").bounding_box()
    box = target.bounding_box()
    assert box is not None, f"{target} is not drawn"
    top, bottom, header_bottom = box["y"], box["y"] + box["height"], header["y"] + header["height"]
    assert top >= header_bottom - 0.5, f"{target} starts at {top}px, under the header ending at {header_bottom}px"
    assert bottom <= page.viewport_size["height"] + 0.5, f"{target} ends at {bottom}px, below the screen"


def _landed(page, said: str):
    """Waits for the page that says `said` to finish loading (the browser scrolls to its #files by then)."""
    message = page.get_by_text(said, exact=True)
    message.wait_for()
    page.wait_for_load_state("load")
    assert page.evaluate("window.scrollY") > 0, "the page did not scroll to its Files card"
    return message


def _on_notebook_page(page_as, make_notebook, viewport, files: dict[str, bytes]):
    """bob's browser on the page of a notebook of his holding `files`."""
    item = make_notebook(files=files)
    page = page_as("bob", viewport=viewport)
    page.goto(f"/a/notebook/items/{item.pk}")
    return page


def test_an_upload_comes_back_with_the_files_heading_and_its_message_in_view(
    page_as, make_notebook, viewport, tmp_path
):
    # Given bob on his notebook's page, with a file on his computer
    upload = tmp_path / "results.csv"
    upload.write_text("a,b\n1,2\n")
    page = _on_notebook_page(page_as, make_notebook, viewport, {"old.txt": b"old"})
    # When he uploads it into the workspace
    page.locator("#upload-file").set_input_files(str(upload))
    page.get_by_role("button", name="Upload", exact=True).click()
    # Then the page comes back with the Files heading and "Uploaded results.csv." below the header, on the screen
    message = _landed(page, "Uploaded results.csv.")
    _assert_below_header_on_screen(page, page.locator("#files-heading"))
    _assert_below_header_on_screen(page, message)
    # (the message is the Files card's own, and the file is listed)
    assert page.locator("[data-testid=files-card] [data-testid=files-said]").inner_text() == "Uploaded results.csv."
    assert page.locator("[data-testid=file-row][data-path='results.csv']").is_visible()
    assert_accessible(page)
    screenshot(page, "files-in-view-after-upload")


def test_a_new_folder_comes_back_with_the_files_heading_and_its_message_in_view(page_as, make_notebook, viewport):
    # Given bob on his notebook's page
    page = _on_notebook_page(page_as, make_notebook, viewport, {"old.txt": b"old"})
    # When he makes the folder data/raw
    page.fill("#new-folder-path", "data/raw")
    page.get_by_role("button", name="Create folder").click()
    # Then the page comes back with the Files heading and "Created the folder data/raw." below the header, on the screen
    message = _landed(page, "Created the folder data/raw.")
    _assert_below_header_on_screen(page, page.locator("#files-heading"))
    _assert_below_header_on_screen(page, message)
    screenshot(page, "files-in-view-after-new-folder")


def test_opening_a_folder_comes_back_with_the_files_heading_and_the_folder_in_view(page_as, make_notebook, viewport):
    # Given bob on his notebook's page, with a folder in its workspace
    page = _on_notebook_page(page_as, make_notebook, viewport, {"data/a.csv": b"1", "old.txt": b"old"})
    # When he opens the folder
    page.locator("[data-testid=file-row][data-path='data']").get_by_role("link", name="data/").click()
    # Then the Files heading and the path of the open folder are below the header, on the screen
    page.locator("[data-testid=file-row][data-path='data/a.csv']").wait_for()
    page.wait_for_load_state("load")
    crumbs = page.locator("[data-testid=folder-crumbs]")
    assert crumbs.inner_text().split() == ["workspace", "/", "data"]
    _assert_below_header_on_screen(page, page.locator("#files-heading"))
    _assert_below_header_on_screen(page, crumbs)
    screenshot(page, "files-in-view-after-opening-a-folder")


def test_a_refused_new_folder_shows_the_files_heading_and_the_refusal_in_view(page_as, make_notebook, viewport):
    # Given bob on his notebook's page, with a file named data
    page = _on_notebook_page(page_as, make_notebook, viewport, {"data": b"not a folder"})
    # When he tries to make the folder data
    page.fill("#new-folder-path", "data")
    page.get_by_role("button", name="Create folder").click()
    # Then the refusal and the Files heading above it are below the header, on the screen
    refusal = page.locator("[data-testid=files-card] [data-testid=refusal]")
    refusal.wait_for()
    page.wait_for_load_state("load")
    _assert_below_header_on_screen(page, page.locator("#files-heading"))
    _assert_below_header_on_screen(page, refusal)

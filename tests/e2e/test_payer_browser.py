"""Browser, at a desktop width and at 390 px: the payer's way out (issue 30.1). carol pays for a
notebook alice created and her disk total is full: from My resources she opens it, finds what is
big, shrinks one file and deletes another, and hands the bill back to alice; staff assigning
her a bill leaves her a record there."""

from __future__ import annotations

import pytest

from collab.actor import Actor
from tests.e2e.browser import assert_accessible, assert_every_action_on_screen, open_file_box, screenshot
from workspace.items import services
from workspace.items.models import Item
from workspace.sandboxes.filestore import workspace_dir

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def small_disk_totals(deployment) -> None:
    deployment('[resources.per_user]\ndisk = "16K"\n')


@pytest.fixture
def alices_notebook_carol_pays_for(make_notebook) -> Item:
    """alice's notebook of 16K (a log in a folder and notes), whose bill carol accepted."""
    item = make_notebook(
        "Alice's experiments", owner="alice", files={"logs/run.log": b"x" * 12288, "notes.txt": b"n" * 4096}
    )
    services.item_update(item=item, actor=Actor("alice"), payer="carol")
    services.item_handover_answer(item_id=item.pk, actor=Actor("carol"), accept=True)
    services.workspaces_sweep()
    return item


def _row(page, path: str):
    return page.locator(f"[data-testid=file-row][data-path='{path}']")


def test_the_payer_frees_disk_in_an_item_she_did_not_create(page_as, alices_notebook_carol_pays_for, viewport):
    item = alices_notebook_carol_pays_for
    page = page_as("carol", viewport=viewport)
    # Given carol on My resources, her disk total used up by alice's notebook
    page.goto("/my-resources")
    page.wait_for_selector("[data-testid=disk-full]")
    # When she follows the notebook's link from "Disk by item"
    page.locator(f"[data-testid=disk-{item.pk}]").get_by_role("link", name="Alice's experiments").click()
    # Then its page opens for her, saying she pays and what she may do, without terminal or editor
    page.wait_for_selector("[data-testid=payer-note]")
    assert page.locator("[data-testid=terminal]").count() == 0
    assert _row(page, "notes.txt").get_by_role("link").count() == 0
    assert_every_action_on_screen(page)
    assert_accessible(page)
    screenshot(page, "payer-item")
    # When she opens the logs folder and shrinks run.log to nothing, agreeing when asked
    _row(page, "logs").get_by_role("link", name="logs/").click()
    open_file_box(_row(page, "logs/run.log"), "Shrink")
    page.once("dialog", lambda dialog: dialog.accept())
    _row(page, "logs/run.log").get_by_role("button", name="Shrink", exact=True).click()
    # Then the page says so and she is still in the folder
    page.wait_for_selector("text=Shrank logs/run.log to 0 bytes.")
    assert "folder=logs" in page.url
    # When she goes back up and deletes notes.txt
    page.locator("[data-testid=folder-crumbs]").get_by_role("link", name="workspace").click()
    page.once("dialog", lambda dialog: dialog.accept())
    _row(page, "notes.txt").get_by_role("button", name="Delete notes.txt").click()
    page.wait_for_selector("text=Deleted notes.txt.")
    # Then the workspace holds an empty log and nothing else
    assert (workspace_dir(item.pk) / "logs" / "run.log").stat().st_size == 0
    assert not (workspace_dir(item.pk) / "notes.txt").exists()
    # When she hands the bill back from the item's page, agreeing when asked
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-testid=hand-back]")
    # Then My resources says alice pays again
    page.wait_for_selector("text=alice pays for Alice's experiments again.")
    assert Item.objects.get(pk=item.pk).payer == "alice"


def test_staff_assigning_a_bill_leaves_the_payer_a_record(settings, page_as, make_notebook, viewport):
    # Given dave is staff and assigned alice's notebook to carol without asking
    settings.WORKSPACE_MOCK_STAFF = ["dave"]
    item = make_notebook("Quarterly numbers", owner="alice")
    services.item_update(item=item, actor=Actor("dave", is_staff=True), payer="carol")
    # When carol opens My resources
    page = page_as("carol", viewport=viewport)
    page.goto("/my-resources")
    # Then it lists the notebook, says dave (staff) assigned it to her, and links to it
    row = page.locator(f"[data-testid=paying-for-{item.pk}]")
    assert "dave (staff) assigned it to you" in row.inner_text()
    assert row.get_by_role("link", name="Quarterly numbers").get_attribute("href") == f"/a/notebook/items/{item.pk}"
    assert_every_action_on_screen(page)
    assert_accessible(page)
    screenshot(page, "payer-assigned-record")

"""Browser: the Owner fields offer people by name, as the Mention card does (issue 47.4)."""

from __future__ import annotations

import pytest

from tests.e2e.browser import assert_accessible, assert_no_sideways_scroll, screenshot
from workspace.items.models import Item

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def configured(deployment) -> None:
    deployment("")


def test_bob_picks_carol_by_name_as_the_owner_of_a_new_item(page_as, viewport):
    # Given bob on the notebook items page
    bob = page_as("bob", viewport=viewport)
    bob.goto("/a/notebook/items")
    bob.fill("#item-title", "Shared analysis")
    # When he types part of carol's name in Owner
    bob.click("#item-owner")
    bob.keyboard.type("Carol")
    # Then the field offers her by name, and the open list passes axe without scrolling sideways
    option = bob.get_by_role("option", name="Carol Nguyen (carol, Data)")
    option.wait_for()
    assert bob.get_attribute("#item-owner", "aria-expanded") == "true"
    assert_accessible(bob)
    assert_no_sideways_scroll(bob)
    screenshot(bob, "owner-picker-open")
    # When he picks her with Enter, then creates the item
    bob.keyboard.press("Enter")
    assert bob.input_value("#item-owner") == "carol"
    assert "Carol Nguyen (carol) picked." in bob.locator("[data-testid=item-owner-status]").inner_text()
    bob.get_by_role("button", name="Create").click()
    # Then the item page says carol is asked to pay
    bob.wait_for_selector("text=carol pays for it once they accept")
    assert Item.objects.get(title="Shared analysis").pending_owner == "carol"


def test_a_name_typed_without_picking_names_the_owner_and_an_unknown_one_is_refused(page_as, make_notebook):
    # Given bob's notebook
    notebook = make_notebook("Scratch", owner="bob")
    bob = page_as("bob")
    bob.goto(f"/a/notebook/items/{notebook.pk}")
    # When he types a name nobody has in Owner and saves
    bob.fill("#edit-owner", "Carla Nguyen")
    bob.get_by_role("button", name="Save").click()
    # Then the page refuses it, keeping what he typed, and nothing changed
    assert "'Carla Nguyen' is not in the user directory." in bob.locator("[data-testid=refusal]").inner_text()
    assert bob.input_value("#edit-owner") == "Carla Nguyen"
    notebook.refresh_from_db()
    assert (notebook.owner, notebook.pending_owner) == ("bob", "")
    # When he types carol's full name and saves with her offered, picking nothing
    bob.fill("#edit-owner", "Carol Nguyen")
    bob.get_by_role("option", name="Carol Nguyen (carol, Data)").wait_for()
    bob.get_by_role("button", name="Save").click()
    # Then carol is asked to pay
    bob.wait_for_selector("text=carol pays for it once they accept")
    notebook.refresh_from_db()
    assert notebook.pending_owner == "carol"

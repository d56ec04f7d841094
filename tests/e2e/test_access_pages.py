"""Browser: the pages of issue 12 as a new user meets them: asking someone to pay and their answer,
API tokens shown once and revoked, and a collection's writers."""

from __future__ import annotations

import pytest

from tests.e2e.browser import assert_accessible

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def configured(deployment) -> None:
    deployment("")


def test_asking_carol_to_pay_waits_until_she_accepts_on_my_resources(page_as, make_notebook):
    # Given bob's notebook
    notebook = make_notebook("Shared analysis", owner="bob")
    bob = page_as("bob")
    # When bob names carol as owner on the item page
    bob.goto(f"/a/notebook/items/{notebook.pk}")
    bob.fill("#edit-owner", "carol")
    bob.get_by_role("button", name="Save").click()
    # Then the page says carol is asked and bob pays meanwhile
    bob.wait_for_selector("text=carol pays for it once they accept")
    assert "waiting for carol" in bob.locator("[data-testid=pending-owner]").inner_text()
    # When carol opens My resources and accepts
    carol = page_as("carol")
    carol.goto("/my-resources")
    row = carol.locator(f"[data-testid=handover-{notebook.pk}]")
    assert "Shared analysis" in row.inner_text()
    assert "bob" in row.inner_text()
    carol.click(f"[data-testid=accept-{notebook.pk}]")
    # Then she is told she pays, and the request is gone
    carol.wait_for_selector("text=You pay for Shared analysis.")
    assert carol.locator("[data-testid=handovers]").count() == 0


def test_a_new_token_is_shown_once_and_a_revoke_asks_first(page_as, viewport):
    from collab.models import ApiToken

    # Given dave on the API tokens page
    dave = page_as("dave", viewport=viewport)
    dave.goto("/")
    if dave.locator("[data-testid=menu-toggle]").is_visible():
        dave.click("[data-testid=menu-toggle]")
    dave.get_by_role("link", name="API tokens").click()
    # When he creates a token
    dave.fill("[data-testid=token-name]", "nightly export")
    dave.click("[data-testid=create-token]")
    # Then it is shown with how to use it, on a page reached by a redirect (a reload creates nothing)
    token = dave.locator("[data-testid=token-value]").input_value()
    assert token.startswith("wst_")
    assert "Authorization: Token" in dave.locator("[data-testid=issued-token]").inner_text()
    dave.reload()
    assert ApiToken.objects.filter(created_by="dave").count() == 1
    assert dave.locator("[data-testid=token-value]").count() == 0
    # When he revokes it and dismisses the question, nothing happens; when he accepts, it is revoked
    revoke = dave.get_by_role("button", name="Revoke")
    dave.once("dialog", lambda dialog: dialog.dismiss())
    revoke.click()
    assert ApiToken.objects.get(created_by="dave").revoked_at is None
    dave.once("dialog", lambda dialog: dialog.accept())
    revoke.click()
    dave.wait_for_selector("text=Revoked nightly export")
    assert "revoked" in dave.locator("[data-testid=tokens]").inner_text()


def test_a_new_token_is_copied_with_one_press(page_as, viewport):
    # Given dave on the API tokens page, his browser letting the page write the clipboard
    dave = page_as("dave", viewport=viewport)
    dave.context.grant_permissions(["clipboard-read", "clipboard-write"])
    dave.goto("/me/tokens")
    dave.fill("[data-testid=token-name]", "deploy hook")
    dave.click("[data-testid=create-token]")

    # When he presses Copy token
    dave.get_by_role("button", name="Copy token").click()

    # Then the clipboard holds the token, and the page says it copied it
    dave.wait_for_selector("text=Copied.")
    assert dave.evaluate("navigator.clipboard.readText()") == dave.locator("[data-testid=token-value]").input_value()
    assert_accessible(dave)


def test_a_reader_sees_who_writes_a_collection_and_the_creator_adds_them(page_as):
    from collab.actor import Actor
    from knowledge import services

    # Given alice's collection
    collection = services.collection_create(actor=Actor("alice"), name="Runbooks")
    # When bob opens it
    bob = page_as("bob")
    bob.goto(f"/kb/collections/{collection.id}/documents")
    # Then he reads it, with no upload form and a note naming who may change it
    assert "ask alice to add you" in bob.locator("[data-testid=read-only-collection]").inner_text()
    assert bob.locator("[data-testid=upload]").count() == 0
    # When alice adds him as writer
    alice = page_as("alice")
    alice.goto(f"/kb/collections/{collection.id}/documents")
    alice.fill("[data-testid=writer-id]", "bob")
    alice.click("[data-testid=add-writer]")
    alice.wait_for_selector("text=bob can now change this collection")
    # Then bob gets the upload form
    bob.reload()
    assert bob.locator("[data-testid=upload]").count() == 1

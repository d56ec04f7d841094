"""Browser, at 390 px (a phone; issue 30.2): every action a page offers is on screen without
scrolling sideways, on the pages where Close, Revoke and the items' Created column used to sit
off to the right inside a table that scrolled: My resources (live sandboxes, handovers, items paid
for, disk per item), API tokens and an app's items."""

from __future__ import annotations

import pytest

from collab import tokens
from collab.actor import Actor
from tests.e2e.browser import PHONE, assert_accessible, assert_every_action_on_screen, open_file_box, screenshot
from workspace.items import services
from workspace.items.access import app_or_404

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def carol_has_a_disk_limit(deployment) -> None:
    deployment('[resources.per_user]\ncount = 3\ndisk = "1G"\n')


@pytest.fixture
def carols_week(make_notebook):
    """carol with a live sandbox, a bill she was asked to take over, one she took over, measured
    disk and two API tokens."""
    app = app_or_404("notebook")
    own = make_notebook("Carol's long-titled experiment notebook", owner="carol", files={"a.txt": b"a" * 2048})
    services.item_exec(item=own, app=app, command="true", actor=Actor("carol"))
    asked = make_notebook("Bob's dashboards", owner="bob")
    services.item_update(item=asked, actor=Actor("bob"), payer="carol")
    paid = make_notebook("Alice's reports", owner="alice", files={"big.log": b"x" * 4096})
    services.item_update(item=paid, actor=Actor("alice"), payer="carol")
    services.item_handover_answer(item_id=paid.pk, actor=Actor("carol"), accept=True)
    services.workspaces_sweep()
    for name in ("nightly backup script", "laptop"):
        tokens.token_create(actor=Actor("carol"), name=name)
    return own, paid


@pytest.mark.parametrize("path", ["/my-resources", "/me/tokens", "/a/notebook/items"])
def test_every_action_and_column_is_on_a_phones_screen(page_as, carols_week, path):
    # Given carol's sandboxes, bills, disk, tokens and items
    page = page_as("carol", viewport=PHONE)
    # When she opens the page on her phone
    page.goto(path)
    # Then every button, link and cell is on screen, and nothing scrolls sideways
    assert_every_action_on_screen(page)
    assert_accessible(page)
    screenshot(page, f"phone{path.replace('/', '-')}")


def test_close_and_revoke_are_reachable_and_work_on_a_phone(page_as, carols_week):
    # Given carol's live sandbox and tokens, on her phone
    own, _paid = carols_week
    page = page_as("carol", viewport=PHONE)
    page.goto("/my-resources")
    # When she presses Close on her sandbox and agrees
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f"[data-testid=close-{own.pk}]")
    # Then it is shut down
    page.wait_for_selector("text=The sandbox is shut down.")
    # When she revokes a token on the tokens page and agrees
    page.goto("/me/tokens")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("[data-testid^=revoke-]").first.click()
    # Then it is revoked, and the page still fits her screen
    page.locator("[data-testid=tokens]", has_text="revoked").wait_for()
    assert_every_action_on_screen(page)


def test_the_payers_item_page_fits_a_phone(page_as, carols_week):
    # Given the notebook alice created and carol pays for
    _own, paid = carols_week
    page = page_as("carol", viewport=PHONE)
    # When carol opens it on her phone and opens Shrink on its log
    page.goto(f"/a/notebook/items/{paid.pk}")
    open_file_box(page.locator("[data-testid=file-row][data-path='big.log']"), "Shrink")
    # Then its sandbox, files, Shrink, Delete and Hand back are all on screen
    assert_every_action_on_screen(page)
    assert_accessible(page)
    screenshot(page, "phone-payer-item")

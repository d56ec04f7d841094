"""Browser, at a desktop width and at 390 px (issue 47.2, 47.3, 47.11): a mentioned non-member's
link lands on a 404 that says whom to ask, and the owner's picker adds her there and then; a
handover shows in the addressee's header and dashboard, and its answer on the asker's; an
investigation's item page sends its users to the investigation."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from collab.actor import Actor
from tests.e2e.browser import assert_accessible, assert_no_sideways_scroll, screenshot
from workspace.investigations import services
from workspace.investigations.models import InvestigationMember
from workspace.items import services as item_services

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_mentioned_non_member_is_told_whom_to_ask_and_the_owner_adds_her_from_the_picker(page_as, viewport):
    # Given alice's investigation, where she mentioned carol, who is no member
    investigation = services.investigation_create(title="Latency spike", actor=Actor("alice"))
    services.mention_create(
        investigation_id=investigation.pk, actor=Actor("alice"), user_ids=["carol"], note="see the graphs"
    )

    # When carol follows her notification's link
    carol = page_as("carol", viewport=viewport)
    carol.goto("/notifications")
    carol.get_by_test_id("notification-link").filter(has_text="Latency spike").click()

    # Then the page is a 404 that says alice mentioned her and to ask alice to add her
    expect(carol.get_by_test_id("ask-to-join")).to_contain_text("Ask Alice Martin to add you as a member")
    expect(carol.get_by_test_id("not-a-member")).to_contain_text("“Alice Martin mentioned you in Latency spike”")
    assert_accessible(carol)
    assert_no_sideways_scroll(carol)
    screenshot(carol, "mention-landing")

    # When alice, in the mention picker, picks carol again
    alice = page_as("alice", viewport=viewport)
    alice.goto(f"/investigations/{investigation.pk}")
    alice.get_by_test_id("mention-search").fill("car")
    alice.locator("[data-testid=mention-options] [data-user-id=carol]").click()
    # Then she is warned, and offered to add carol there and then
    expect(alice.get_by_test_id("mention-outsiders")).to_contain_text("carol is not a member")
    add = alice.get_by_role("button", name="Add carol as a member")
    expect(add).to_be_visible()
    assert_accessible(alice)
    screenshot(alice, "mention-add-offer")

    # When she takes the offer
    add.click()
    # Then carol is a member, shown as one, the warning goes, and the draft mention stays
    expect(alice.get_by_test_id("members")).to_have_text("carol")
    expect(alice.get_by_test_id("mention-outsiders")).to_be_hidden()
    expect(alice.get_by_test_id("mention-status")).to_have_text("carol is now a member.")
    expect(alice.locator("#mention-chosen [data-user-id=carol]")).to_have_text("@carol ×")
    assert InvestigationMember.objects.filter(investigation=investigation, user_id="carol").exists()

    # When carol reloads her link / Then the investigation opens
    carol.reload()
    expect(carol.locator("h1")).to_contain_text("Latency spike")


def test_a_member_who_is_not_the_owner_gets_no_add_offer(page_as):
    # Given alice's investigation with bob as member
    investigation = services.investigation_create(title="Latency spike", actor=Actor("alice"), members=["bob"])
    # When bob picks carol in the mention picker
    bob = page_as("bob")
    bob.goto(f"/investigations/{investigation.pk}")
    bob.get_by_test_id("mention-search").fill("car")
    bob.locator("[data-testid=mention-options] [data-user-id=carol]").click()
    # Then he is told alice, the owner, adds members, and offered no button
    expect(bob.get_by_test_id("mention-outsiders")).to_contain_text("until its owner, alice, adds them.")
    assert bob.get_by_test_id("mention-add-members").count() == 0


def test_a_handover_shows_where_the_addressee_looks_and_its_answer_where_the_asker_looks(
    page_as, make_notebook, viewport
):
    # Given bob's notebook, whose bill he asked carol to take over
    item = make_notebook("Shared notes", owner="bob")
    item_services.item_update(item=item, actor=Actor("bob"), payer="carol")

    # When carol opens her home page
    carol = page_as("carol", viewport=viewport)
    carol.goto("/")
    # Then her header says one bill waits, and her dashboard names it and who asks
    expect(carol.get_by_test_id("handovers-waiting")).to_have_text("1 bill to answer")
    expect(carol.get_by_test_id("home-handovers-waiting")).to_contain_text("Bob Okafor asks you to pay for it")
    assert_accessible(carol)
    assert_no_sideways_scroll(carol)
    screenshot(carol, "handover-waiting")

    # When she follows the header's link and accepts
    carol.get_by_test_id("handovers-waiting").click()
    carol.get_by_test_id(f"accept-{item.pk}").click()
    # Then the header no longer counts it
    expect(carol.get_by_test_id("handovers-waiting")).to_have_count(0)

    # When bob opens his home page
    bob = page_as("bob", viewport=viewport)
    bob.goto("/")
    # Then it tells him carol accepted, linking to the item
    news = bob.get_by_test_id("home-handover-news")
    expect(news).to_contain_text("Carol Nguyen accepted: they pay for it now")
    expect(news.get_by_role("link", name="Shared notes")).to_have_attribute("href", f"/a/notebook/items/{item.pk}")
    assert_accessible(bob)

    # When carol hands the bill back from My resources
    carol.goto("/my-resources")
    carol.once("dialog", lambda dialog: dialog.accept())
    carol.get_by_test_id(f"return-{item.pk}").click()
    expect(carol.get_by_test_id(f"return-{item.pk}")).to_have_count(0)
    # Then bob's dashboard says so
    bob.reload()
    expect(bob.get_by_test_id("home-handover-news")).to_contain_text(
        "Carol Nguyen handed the bill back: you pay for it again"
    )


def test_an_investigation_has_one_page(page_as):
    # Given alice's investigation
    investigation = services.investigation_create(title="Latency spike", actor=Actor("alice"))
    alice = page_as("alice")

    # When she opens its item's address
    alice.goto(f"/a/rca/items/{investigation.pk}")
    # Then she is on the investigation's page, with its status and members
    expect(alice).to_have_url(re.compile(f"/investigations/{investigation.pk}$"))
    expect(alice.get_by_test_id("status")).to_have_text("Open")

    # When she follows "Terminal and files" / Then the item page opens, linking back
    alice.get_by_test_id("terminal-and-files").click()
    alice.get_by_test_id("shell").wait_for()
    alice.get_by_test_id("own-page").click()
    expect(alice.get_by_test_id("status")).to_have_text("Open")

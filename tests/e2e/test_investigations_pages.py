"""Browser: mention a colleague and see their bell rise, while only the owner's adding lets them in;
move the status and see the member notified; the people search picks with Enter; the list and the
page fit a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from collab.actor import Actor
from tests.e2e.browser import assert_accessible, assert_no_sideways_scroll, screenshot
from workspace.agent.models import ItemMessage
from workspace.investigations import services
from workspace.investigations.models import InvestigationMember

pytestmark = pytest.mark.django_db(transaction=True)


def test_mentioning_a_colleague_rings_their_bell_and_only_adding_them_lets_them_in(page_as):
    # Given alice's investigation, and carol's bell at zero
    investigation = services.investigation_create(title="Latency spike", actor=Actor("alice"))
    carol = page_as("carol")
    carol.goto("/")
    assert carol.locator("[data-testid=bell-count]").inner_text() == "0"

    # When alice picks carol in the mention search
    alice = page_as("alice")
    alice.goto(f"/investigations/{investigation.pk}")
    alice.fill("[data-testid=mention-search]", "car")
    alice.click("[data-testid=mention-options] [data-user-id=carol]")
    # Then she is warned that carol, no member, will not be able to open it
    expect(alice.get_by_test_id("mention-outsiders")).to_contain_text("carol is not a member")

    # When she sends carol a note
    alice.fill("[data-testid=mention-note]", "can you check the data pipeline?")
    alice.click("[data-testid=mention-send]")
    alice.locator("[data-testid=message][data-role=mention]").filter(has_text="data pipeline").wait_for()
    # Then carol's bell shows one after a reload, but the investigation is a 404 to her
    carol.reload()
    assert carol.locator("[data-testid=bell-count]").inner_text() == "1"
    assert carol.goto(f"/investigations/{investigation.pk}").status == 404

    # When alice adds carol as a member
    alice.get_by_test_id("members-add").fill("carol")
    alice.get_by_test_id("members-send").click()
    expect(alice.get_by_test_id("members")).to_have_text("carol")
    # Then carol opens the investigation
    carol.goto(f"/investigations/{investigation.pk}")
    assert carol.locator("h1").inner_text().startswith("Latency spike")


def test_moving_the_status_notifies_the_member(page_as):
    # Given alice's investigation with bob as member
    investigation = services.investigation_create(title="Disk alerts", actor=Actor("alice"), members=["bob"])
    # When alice moves its status to in progress on the page
    alice = page_as("alice")
    alice.goto(f"/investigations/{investigation.pk}")
    alice.get_by_test_id("status-move-in_progress").click()
    alice.locator("[data-testid=status]").filter(has_text="In progress").wait_for()

    # Then bob's bell shows one and his notifications say the investigation is now in progress
    bob = page_as("bob")
    bob.goto("/notifications")
    assert bob.locator("[data-testid=bell-count]").inner_text() == "1"
    assert "Disk alerts is now in progress" in bob.content()


def test_enter_in_the_people_search_picks_the_highlighted_person(page_as, viewport):
    # Given alice on her investigation
    investigation = services.investigation_create(title="Latency spike", actor=Actor("alice"))
    alice = page_as("alice", viewport=viewport)
    alice.goto(f"/investigations/{investigation.pk}")

    # When she types part of a name, moves down to the second match and presses Enter, twice over
    search = alice.get_by_test_id("mention-search")
    search.fill("a")
    matches = alice.locator("#mention-options [role=option]")
    matches.first.wait_for()
    first_two = [option.get_attribute("data-user-id") for option in matches.all()[:2]]
    search.press("ArrowDown")
    search.press("Enter")
    search.fill("carol")
    alice.locator("#mention-options [data-user-id=carol]").wait_for()
    search.press("Enter")

    # Then the second match and carol are chosen, the search is empty again, and nothing was sent yet
    chosen = alice.locator("[data-testid=mention-chosen] .chip")
    expect(chosen).to_have_count(2)
    assert [chip.get_attribute("data-user-id") for chip in chosen.all()] == [first_two[1], "carol"]
    assert search.input_value() == ""
    assert not InvestigationMember.objects.exists()
    assert_no_sideways_scroll(alice)
    assert_accessible(alice)
    screenshot(alice, "investigation-people-picked")

    # When she sends the mention with Enter from the note
    alice.get_by_test_id("mention-note").fill("please look")
    alice.get_by_test_id("mention-note").press("Enter")
    alice.locator("[data-testid=message][data-role=mention]").filter(has_text="please look").wait_for()

    # Then both are mentioned, and the mention made neither a member
    assert ItemMessage.objects.get(role="mention").mentions == [first_two[1], "carol"]
    assert not InvestigationMember.objects.exists()


def test_sending_a_mention_with_nobody_picked_says_what_to_do(page_as):
    # Given alice on her investigation, with a name typed that matches nobody
    investigation = services.investigation_create(title="Latency spike", actor=Actor("alice"))
    alice = page_as("alice")
    alice.goto(f"/investigations/{investigation.pk}")
    alice.get_by_test_id("mention-search").fill("zzz")
    expect(alice.get_by_test_id("mention-status")).to_contain_text("No one matches")

    # When she presses Mention
    alice.get_by_test_id("mention-send").click()

    # Then she is told to pick someone, and nothing is sent
    assert "Pick at least one person" in alice.get_by_test_id("mention-refusal").inner_text()
    assert not InvestigationMember.objects.exists()


def test_the_investigation_page_offers_only_real_moves_and_fits_a_phone(page_as, viewport):
    # Given alice's investigation in progress
    investigation = services.investigation_create(title="Disk alerts", actor=Actor("alice"), members=["bob"])
    services.status_change(investigation_id=investigation.pk, actor=Actor("alice"), status="in_progress")
    alice = page_as("alice", viewport=viewport)

    # When she opens it
    alice.goto(f"/investigations/{investigation.pk}")

    # Then the status control offers the three other statuses only, and the page fits the screen
    moves = alice.locator("[data-testid^=status-move-]").all_inner_texts()
    assert moves == ["Open", "Resolved", "Closed"]
    assert_no_sideways_scroll(alice)
    assert_accessible(alice)
    screenshot(alice, "investigation")


def test_the_one_list_of_investigations_fits_a_phone(page_as, viewport):
    # Given alice's two investigations
    services.investigation_create(title="Disk alerts on node 4", actor=Actor("alice"), members=["bob", "carol"])
    services.investigation_create(title="Latency spike after the deploy", actor=Actor("alice"))
    alice = page_as("alice", viewport=viewport)

    # When she opens the investigations app from the apps page's address
    alice.goto("/a/rca/items")

    # Then she lands on the one list, which shows both and fits the screen
    assert alice.url.endswith("/investigations")
    assert alice.locator("[data-testid=investigations] tbody tr").count() == 2
    assert_no_sideways_scroll(alice)
    assert_accessible(alice)
    screenshot(alice, "investigations")

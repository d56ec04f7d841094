"""Browser: mention a colleague and see their bell rise, while only the owner's adding lets them in;
an `@id` typed in the chat mentions instead of asking the agent, so a full quota does not refuse
it; move the status and see the member notified; the people search picks with Enter; the list and
the page fit a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from collab.actor import Actor
from collab.models import Notification
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


# Alice may use half a core; an investigation's sandbox takes one, so opening it is refused (507).
FULL_QUOTA = "[resources.per_app.default]\ncpu = 1\n[resources.per_user]\ncpu = 0.5\n"
QUOTA_REFUSAL = "Opening a sandbox would exceed alice's cpu limit"


def _chat(page, text: str) -> None:
    page.get_by_test_id("chat-content").fill(text)
    page.get_by_test_id("chat-send").click()


def test_a_mention_typed_in_the_chat_notifies_without_an_agent_turn_while_the_quota_is_full(
    page_as, viewport, deployment
):
    # Given alice's investigation with bob as member, and her sandbox quota full
    deployment(FULL_QUOTA)
    investigation = services.investigation_create(title="Latency spike", actor=Actor("alice"), members=["bob"])
    alice = page_as("alice", viewport=viewport)
    alice.goto(f"/investigations/{investigation.pk}")

    # When she types "@bob have a look" in the chat and sends it
    _chat(alice, "@bob have a look")

    # Then the page says bob was mentioned, the draft is cleared and the mention shows in the conversation
    expect(alice.get_by_test_id("chat-status")).to_have_text(
        "Mentioned Bob Okafor (@bob): notified, and the agent was not asked."
    )
    expect(alice.get_by_test_id("chat-content")).to_have_value("")
    stored = alice.locator("[data-testid=message][data-role=mention]")
    expect(stored.get_by_test_id("message-body")).to_have_text("@bob have a look")
    expect(stored.get_by_test_id("mentions")).to_have_text("@bob")
    # And no refusal shows, bob is notified, and the one message stored is the mention: no turn started
    expect(alice.locator("[data-testid=chat-refusal] [data-testid=refusal]")).to_have_count(0)
    assert QUOTA_REFUSAL not in alice.content()
    notice = Notification.objects.get(recipient="bob")
    assert (notice.kind, notice.actor, notice.body) == ("mention", "alice", "@bob have a look")
    messages = ItemMessage.objects.filter(item_id=investigation.pk)
    assert list(messages.values_list("role", "mentions")) == [("mention", ["bob"])]
    assert_no_sideways_scroll(alice)
    assert_accessible(alice)
    screenshot(alice, "investigation-chat-mention")


def test_a_chat_message_without_a_mention_still_goes_to_the_agent_and_a_full_quota_refuses_it(page_as, deployment):
    # Given alice's investigation with bob as member, and her sandbox quota full
    deployment(FULL_QUOTA)
    investigation = services.investigation_create(title="Latency spike", actor=Actor("alice"), members=["bob"])
    alice = page_as("alice")
    alice.goto(f"/investigations/{investigation.pk}")

    # When she asks the agent something that names nobody
    _chat(alice, "what changed in the deploy?")

    # Then the quota refuses it as before: the 507 names her cpu limit, the draft stays, nothing is stored
    refusal = alice.locator("[data-testid=chat-refusal] [data-testid=refusal]")
    expect(refusal).to_contain_text(QUOTA_REFUSAL)
    expect(refusal.get_by_role("link", name="Free capacity on My resources")).to_be_visible()
    expect(alice.get_by_test_id("chat-content")).to_have_value("what changed in the deploy?")
    assert not ItemMessage.objects.filter(item_id=investigation.pk).exists()
    assert not Notification.objects.exists()


def test_an_at_word_that_names_nobody_in_the_directory_goes_to_the_agent_as_plain_text(page_as):
    # Given alice's investigation, and room for its sandbox
    investigation = services.investigation_create(title="Latency spike", actor=Actor("alice"))
    alice = page_as("alice")
    alice.goto(f"/investigations/{investigation.pk}")

    # When she sends "@nobody look at the disk", nobody being no one's id
    _chat(alice, "@nobody look at the disk")

    # Then the agent answers it: her message is stored as a chat message, and nobody is mentioned
    alice.locator("[data-testid=message][data-role=agent]").wait_for()
    user_message = ItemMessage.objects.get(item_id=investigation.pk, role="user")
    assert (user_message.content, user_message.mentions) == ("@nobody look at the disk", [])
    assert not ItemMessage.objects.filter(role="mention").exists()
    assert not Notification.objects.exists()


def test_a_chat_mention_names_only_people_outside_code_and_addresses_and_warns_about_non_members(page_as, deployment):
    # Given alice's investigation without members, and her sandbox quota full
    deployment(FULL_QUOTA)
    investigation = services.investigation_create(title="Latency spike", actor=Actor("alice"))
    alice = page_as("alice")
    alice.goto(f"/investigations/{investigation.pk}")

    # When she mentions carol, with dave in inline code and bob in an address
    _chat(alice, "@carol, the alerts go to bob@example.com; see `@dave` in the runbook.")

    # Then only carol is mentioned, and the page says carol cannot open the investigation until
    # alice, its owner, adds her, which she is offered there and then
    expect(alice.get_by_test_id("chat-status")).to_have_text(
        "Mentioned Carol Nguyen (@carol): notified, and the agent was not asked. carol is not a member: "
        "they cannot open this investigation until you add them."
    )
    assert ItemMessage.objects.get(item_id=investigation.pk).mentions == ["carol"]
    assert list(Notification.objects.values_list("recipient", flat=True)) == ["carol"]
    assert not InvestigationMember.objects.exists()
    assert_accessible(alice)

    # When she takes the offer
    alice.get_by_test_id("chat-add-offer").get_by_role("button", name="Add carol as a member").click()

    # Then carol is a member, the members line says so, and the offer is gone
    expect(alice.get_by_test_id("chat-status")).to_have_text("carol is now a member.")
    expect(alice.get_by_test_id("members")).to_have_text("carol")
    expect(alice.get_by_test_id("chat-add-offer")).to_have_count(0)
    assert list(InvestigationMember.objects.values_list("user_id", flat=True)) == ["carol"]


def test_a_member_who_mentions_a_non_member_in_the_chat_is_told_only_the_owner_adds_them(page_as, deployment):
    # Given alice's investigation with bob as member, and alice's sandbox quota full
    deployment(FULL_QUOTA)
    investigation = services.investigation_create(title="Latency spike", actor=Actor("alice"), members=["bob"])
    bob = page_as("bob")
    bob.goto(f"/investigations/{investigation.pk}")

    # When bob mentions carol in the chat
    _chat(bob, "@carol can you look?")

    # Then he is told its owner adds members, and offered no button to do it himself
    expect(bob.get_by_test_id("chat-status")).to_contain_text("until its owner adds them.")
    expect(bob.get_by_test_id("chat-add-offer")).to_have_count(0)
    assert not InvestigationMember.objects.filter(user_id="carol").exists()


def test_a_chat_mention_the_server_refuses_keeps_the_draft_and_shows_why(page_as, deployment):
    # Given alice's investigation, her sandbox quota full, and a page whose directory still lists
    # zed, who has since left the server's directory
    deployment(FULL_QUOTA)
    investigation = services.investigation_create(title="Latency spike", actor=Actor("alice"))
    alice = page_as("alice")

    def stale_directory(route):
        users = route.fetch().json()
        route.fulfill(json=[*users, {"id": "zed", "name": "Zed Former", "section": "", "email": "", "photo_url": None}])

    alice.route("**/users", stale_directory)
    alice.goto(f"/investigations/{investigation.pk}")

    # When she mentions zed in the chat
    _chat(alice, "@zed one more look?")

    # Then the mentions endpoint's refusal shows by the form, the draft stays, and nothing is stored
    refusal = alice.locator("[data-testid=chat-refusal] [data-testid=refusal]")
    expect(refusal).to_have_text("Not in the user directory: zed.")
    expect(alice.get_by_test_id("chat-content")).to_have_value("@zed one more look?")
    expect(alice.get_by_test_id("chat-status")).to_have_text("")
    assert not ItemMessage.objects.filter(item_id=investigation.pk).exists()
    assert not Notification.objects.exists()

"""Investigation pages: the list with its create form, and one investigation's page."""

from __future__ import annotations

import pytest

from workspace.investigations.models import Investigation

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


def test_the_list_page_shows_the_callers_investigations(bob_api, make_investigation):
    # Given alice's investigation shared with bob, and carol's private one
    make_investigation(title="Shared with bob", members=("bob",))
    make_investigation(title="Private to carol", owner="carol")
    # When bob opens the list page
    page = bob_api.get("/investigations", **HTML).content.decode()
    # Then it shows the one he is in and not carol's
    assert "Shared with bob" in page
    assert "Private to carol" not in page


def test_the_create_form_opens_the_new_investigation(alice_api):
    # Given alice in a browser, and bob and carol in the directory
    # When she submits the page's create form with bob and carol as members
    response = alice_api.post("/investigations", {"title": "From the form", "members": "bob carol"}, **HTML)
    # Then she is sent to the new investigation, which has both as members
    investigation = Investigation.objects.get()
    assert response["Location"] == f"/investigations/{investigation.pk}"
    assert sorted(investigation.members.values_list("user_id", flat=True)) == ["bob", "carol"]


def test_the_create_form_shows_an_unknown_member_as_a_message(alice_api):
    # Given alice in a browser, and zed, who is not in the directory
    # When she submits the create form naming zed as member
    response = alice_api.post("/investigations", {"title": "T", "members": "zed"}, follow=True, **HTML)
    # Then the page tells her zed is unknown and nothing is stored
    assert "Not in the user directory: zed." in response.content.decode()
    assert not Investigation.objects.exists()


def test_the_page_shows_the_conversation_status_control_and_picker(alice_api, make_investigation):
    # Given alice's investigation Disk alerts with bob as member, and her mention of carol saying ping
    investigation = make_investigation(title="Disk alerts", members=("bob",))
    alice_api.post(
        f"/investigations/{investigation.pk}/mentions", {"user_ids": ["carol"], "note": "ping"}, format="json"
    )
    # When she opens its page
    page = alice_api.get(f"/investigations/{investigation.pk}", **HTML).content.decode()
    # Then it shows the status control, the mention picker, the mention, and bob, the one member
    for expected in ('data-testid="status-form"', 'data-testid="mention-search"', "@carol", "ping"):
        assert expected in page
    assert '<span data-testid="members">bob</span>' in page


def test_a_stranger_gets_the_404_page(carol_api, make_investigation):
    # Given alice's investigation
    investigation = make_investigation(owner="alice")
    # When carol, a stranger, opens its page / Then it is 404
    assert carol_api.get(f"/investigations/{investigation.pk}", **HTML).status_code == 404


def test_the_item_page_carries_the_chat_panel(alice_api, make_item):
    # Given alice's notebook, with one command run through its chat
    item = make_item()
    alice_api.post(f"/a/notebook/items/{item.pk}/messages", {"content": "$ echo panel"}, format="json")
    # When she opens the item page
    page = alice_api.get(f"/a/notebook/items/{item.pk}", **HTML).content.decode()
    # Then it carries the chat panel with the command's output
    assert 'data-testid="chat-panel"' in page
    assert "[exit 0]" in page


def test_the_status_control_offers_only_real_moves(alice_api, make_investigation):
    # Given alice's open investigation
    investigation = make_investigation()

    # When she opens its page
    page = alice_api.get(f"/investigations/{investigation.pk}", **HTML).content.decode()

    # Then it offers a move to each other status, and none to open, where it already is
    for status in ("in_progress", "resolved", "closed"):
        assert f'data-testid="status-move-{status}"' in page
    assert 'data-testid="status-move-open"' not in page


def test_the_status_control_follows_the_current_status(alice_api, make_investigation):
    # Given alice's investigation moved to resolved
    investigation = make_investigation()
    alice_api.post(f"/investigations/{investigation.pk}/status", {"status": "resolved"}, format="json")

    # When she opens its page
    page = alice_api.get(f"/investigations/{investigation.pk}", **HTML).content.decode()

    # Then it offers open again, and no move to resolved
    assert 'data-testid="status-move-open"' in page
    assert 'data-testid="status-move-resolved"' not in page


def test_the_rca_items_list_sends_a_browser_to_the_one_list_of_investigations(alice_api):
    # Given alice in a browser
    # When she opens the investigations app's items list
    response = alice_api.get("/a/rca/items", **HTML)

    # Then she is sent to /investigations, the one list
    assert response.status_code == 302
    assert response["Location"] == "/investigations"


def test_the_rca_items_api_still_lists_them(alice_api, make_investigation):
    # Given alice's investigation
    investigation = make_investigation(title="Disk alerts")

    # When a program lists the rca app's items
    response = alice_api.get("/a/rca/items")

    # Then it gets them as JSON, as before
    assert response.status_code == 200
    assert [row["id"] for row in response.json()["results"]] == [investigation.pk]


def test_a_mention_naming_nobody_says_so_plainly(alice_api, make_investigation):
    # Given alice's investigation
    investigation = make_investigation()

    # When a mention names nobody
    response = alice_api.post(
        f"/investigations/{investigation.pk}/mentions", {"user_ids": [], "note": "hello"}, format="json"
    )

    # Then it is a 400 whose detail says what to do, and no message is stored
    assert response.status_code == 400
    assert response.json()["detail"] == "user_ids: Name at least one person to mention."
    assert not investigation.item.messages.exists()


def test_the_owner_gets_the_add_members_form_and_a_member_is_told_who_adds(alice_api, bob_api, make_investigation):
    # Given alice's investigation with bob as member
    investigation = make_investigation(members=("bob",))
    # When alice and bob open its page
    owners = alice_api.get(f"/investigations/{investigation.pk}", **HTML).content.decode()
    members = bob_api.get(f"/investigations/{investigation.pk}", **HTML).content.decode()
    # Then alice has the form that adds members; bob reads that only alice adds them
    assert 'data-testid="members-form"' in owners
    assert 'data-testid="members-form"' not in members
    assert "Only the owner, alice, adds members." in members


def test_the_page_gives_the_picker_who_can_open_the_investigation(alice_api, make_investigation):
    # Given alice's investigation with bob as member
    investigation = make_investigation(members=("bob",))
    # When she opens its page
    page = alice_api.get(f"/investigations/{investigation.pk}", **HTML).content.decode()
    # Then the picker is given the owner and the members, so it can warn about anyone else
    assert '<script id="investigation-participants" type="application/json">["alice", "bob"]</script>' in page

"""Investigations: create, list (owner or member), read, and the item they are."""

from __future__ import annotations

import pytest

from collab.actor import Actor
from workspace.investigations.access import InvestigationRight, investigation_for
from workspace.investigations.models import Investigation, InvestigationMember
from workspace.items.models import Item

pytestmark = pytest.mark.django_db


def test_creating_an_investigation_makes_an_rca_item_with_members(alice_api):
    # Given alice, and bob in the directory
    # When she creates an investigation titled Disk alerts with bob as member
    response = alice_api.post("/investigations", {"title": "Disk alerts", "members": ["bob"]}, format="json")
    # Then it is open, hers, with bob and no message yet, and it is an rca item she created
    assert response.status_code == 201
    body = response.json()
    assert (body["title"], body["status"], body["owner"], body["members"]) == ("Disk alerts", "open", "alice", ["bob"])
    assert body["messages"] == []
    item = Item.objects.get(pk=body["id"])
    assert (item.app_slug, item.created_by) == ("rca", "alice")


def test_an_unknown_member_is_refused_by_name_and_nothing_is_stored(alice_api):
    # Given alice, bob in the directory and zed not
    # When she creates an investigation naming bob and zed as members
    response = alice_api.post("/investigations", {"title": "T", "members": ["bob", "zed"]}, format="json")
    # Then it is 400 unknown_users naming zed only, and no item is stored
    assert response.status_code == 400
    assert (response.json()["error"], response.json()["user_ids"]) == ("unknown_users", ["zed"])
    assert not Item.objects.exists()


@pytest.mark.parametrize("body", [{}, {"title": ""}, {"title": "T", "members": "bob"}])
def test_a_bad_create_body_is_refused(alice_api, body):
    # Given alice, with no investigation yet
    # When she creates one with no title, an empty title or members that are no list / Then it is 400
    assert alice_api.post("/investigations", body, format="json").status_code == 400
    # Then no investigation is stored either
    assert not Investigation.objects.exists()


def test_the_list_holds_what_the_caller_owns_or_is_a_member_of(alice_api, bob_api, make_investigation):
    # Given bob's investigation, alice's with bob as member, and carol's
    mine = make_investigation(title="Mine", owner="bob")
    joined = make_investigation(title="Joined", owner="alice", members=("bob",))
    make_investigation(title="Not mine", owner="carol")
    # When bob lists investigations
    titles = [row["title"] for row in bob_api.get("/investigations").json()]
    # Then he sees the one he joined and his own, newest first, and not carol's
    assert titles == [joined.item.title, mine.item.title]


def test_the_list_costs_the_same_queries_for_many_investigations(
    bob_api, make_investigation, django_assert_max_num_queries
):
    # Given twenty investigations of alice's, each with bob and carol as members
    for number in range(20):
        make_investigation(title=f"Case {number}", owner="alice", members=("bob", "carol"))
    # When bob lists investigations
    with django_assert_max_num_queries(4):
        rows = bob_api.get("/investigations").json()
    # Then all twenty come back with their members, in a bounded number of queries
    assert len(rows) == 20
    assert rows[0]["members"] == ["bob", "carol"]


def test_the_detail_carries_status_members_and_messages(alice_api, make_investigation):
    # Given alice's investigation with bob as member
    investigation = make_investigation(members=("bob",))
    # When she mentions carol and reads the investigation
    alice_api.post(f"/investigations/{investigation.pk}/mentions", {"user_ids": ["carol"]}, format="json")
    body = alice_api.get(f"/investigations/{investigation.pk}").json()
    # Then it is open, bob is still the one member and the conversation holds the mention
    assert (body["status"], body["members"]) == ("open", ["bob"])
    assert [(m["role"], m["mentions"]) for m in body["messages"]] == [("mention", ["carol"])]


def test_a_stranger_gets_404_like_a_missing_investigation(bob_api, make_investigation):
    # Given alice's investigation
    investigation = make_investigation(owner="alice")
    # When bob, who is no member, opens it / Then it is 404
    assert bob_api.get(f"/investigations/{investigation.pk}").status_code == 404
    # When he opens an id that does not exist / Then it is 404 as well
    assert bob_api.get("/investigations/999999").status_code == 404


def test_a_notebook_item_is_not_an_investigation(alice_api, make_item):
    # Given alice's notebook
    item = make_item(app_slug="notebook")
    # When she opens it as an investigation / Then it is 404
    assert alice_api.get(f"/investigations/{item.pk}").status_code == 404


def test_members_may_open_the_investigations_item(bob_api, carol_api, make_investigation):
    # Given alice's investigation with bob as member
    investigation = make_investigation(owner="alice", members=("bob",))
    # When bob opens it as an item / Then he may
    assert bob_api.get(f"/a/rca/items/{investigation.pk}").status_code == 200
    # When carol, a stranger, does / Then it is 404
    assert carol_api.get(f"/a/rca/items/{investigation.pk}").status_code == 404


def test_an_rca_item_made_through_the_item_routes_is_an_open_investigation(alice_api):
    # Given an rca item alice made through the generic item routes
    item_id = alice_api.post("/a/rca/items", {"title": "Made as an item"}, format="json").json()["id"]
    # When she reads it as an investigation
    body = alice_api.get(f"/investigations/{item_id}").json()
    # Then it is an open investigation with no members
    assert (body["id"], body["status"], body["members"]) == (item_id, "open", [])


def test_the_browser_gets_the_page_at_the_same_path(alice_api, make_investigation):
    # Given alice's investigation titled Paged
    investigation = make_investigation(title="Paged")
    # When her browser opens its API path
    response = alice_api.get(f"/investigations/{investigation.pk}", HTTP_ACCEPT="text/html")
    # Then it gets the page, which shows the title
    assert response.status_code == 200
    assert b"Paged" in response.content


def test_a_membership_row_is_unique(make_investigation):
    # Given an investigation made with bob named twice as member
    # When its membership rows are counted
    investigation = make_investigation(members=("bob", "bob"))
    # Then bob has one
    assert InvestigationMember.objects.filter(investigation=investigation).count() == 1


def test_reading_an_rca_item_made_through_the_item_routes_writes_nothing(alice_api):
    # Given an rca item made through the generic item routes (no investigation row yet)
    item_id = alice_api.post("/a/rca/items", {"title": "From the item routes"}, format="json").json()["id"]

    # When alice reads it as an investigation, through the API and the page
    body = alice_api.get(f"/investigations/{item_id}").json()
    page = alice_api.get(f"/investigations/{item_id}", HTTP_ACCEPT="text/html")

    # Then she sees it, open, and no row was written by those GETs
    assert (body["id"], body["status"]) == (item_id, "open")
    assert page.status_code == 200
    assert not Investigation.objects.filter(pk=item_id).exists()


def test_the_access_helper_stores_no_row_even_when_a_writer_asks(alice_api):
    # Given an rca item made through the generic item routes (no investigation row yet)
    item_id = alice_api.post("/a/rca/items", {"title": "From the item routes"}, format="json").json()["id"]

    # When the access helper fetches it for a writer, to own it and holding its row
    investigation = investigation_for(item_id, actor=Actor("alice"), need=InvestigationRight.OWN, lock=True)

    # Then it answers with the investigation built in memory, and has written nothing
    assert (investigation.pk, investigation._state.adding) == (item_id, True)
    assert not Investigation.objects.filter(pk=item_id).exists()


def test_a_strangers_write_to_such_an_investigation_stores_no_row(alice_api, carol_api):
    # Given an rca item alice made through the generic item routes
    item_id = alice_api.post("/a/rca/items", {"title": "From the item routes"}, format="json").json()["id"]

    # When carol, a stranger, tries to move its status
    response = carol_api.post(f"/investigations/{item_id}/status", {"status": "in_progress"}, format="json")

    # Then it is not there for her, and no row was stored
    assert response.status_code == 404
    assert not Investigation.objects.filter(pk=item_id).exists()


def test_the_first_write_to_such_an_investigation_stores_its_row(alice_api):
    # Given an rca item made through the generic item routes
    item_id = alice_api.post("/a/rca/items", {"title": "From the item routes"}, format="json").json()["id"]

    # When alice moves its status
    response = alice_api.post(f"/investigations/{item_id}/status", {"status": "in_progress"}, format="json")

    # Then the investigation row exists with the new status
    assert response.status_code == 200
    assert Investigation.objects.get(pk=item_id).status == "in_progress"

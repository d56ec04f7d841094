"""Items: create, read, list, owner locking, and privacy (someone else's item is a 404)."""

from __future__ import annotations

import pytest

from collab.actor import Actor
from collab.errors import Forbidden
from tests.fixtures.items import item_url
from workspace.items import services
from workspace.items.models import Item

pytestmark = pytest.mark.django_db


def test_creating_an_item_records_the_creator_and_defaults_the_owner_to_them(alice_api):
    # Given alice, with no item yet
    # When she creates a notebook item
    response = alice_api.post("/a/notebook/items", {"title": "Scratch"}, format="json")
    # Then it is 201, she is its creator and owner, and no sandbox is open yet
    assert response.status_code == 201
    body = response.json()
    assert (body["owner"], body["created_by"], body["app"]) == ("alice", "alice", "notebook")
    assert body["sandbox"] is None


def test_creating_an_item_for_another_owner_asks_them_and_keeps_the_creator_paying(alice_api):
    # Given alice, and bob in the directory
    # When she creates a notebook naming bob as owner
    body = alice_api.post("/a/notebook/items", {"title": "For bob", "owner": "bob"}, format="json").json()
    # Then she still pays and bob is asked to
    assert (body["owner"], body["pending_owner"], body["created_by"]) == ("alice", "bob", "alice")


def test_creating_an_item_without_a_title_is_400_and_stores_nothing(alice_api):
    # Given alice, with no item yet
    # When she creates a notebook with an empty title
    response = alice_api.post("/a/notebook/items", {"title": ""}, format="json")
    # Then it is 400 validation_error and nothing is stored
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert not Item.objects.exists()


def test_creating_an_item_for_an_unknown_owner_is_400(alice_api):
    # Given alice, and mallory, who is not in the directory
    # When she creates a notebook naming mallory as owner
    response = alice_api.post("/a/notebook/items", {"title": "x", "owner": "mallory"}, format="json")
    # Then it is 400 unknown_user and nothing is stored
    assert response.status_code == 400
    assert response.json()["error"] == "unknown_user"
    assert not Item.objects.exists()


def test_unknown_app_slug_is_404(alice_api):
    # Given no app with the slug nope
    # When alice creates an item under it / Then it is 404
    assert alice_api.post("/a/nope/items", {"title": "x"}, format="json").status_code == 404
    # When she lists its items / Then it is 404 not_found too
    assert alice_api.get("/a/nope/items").json()["error"] == "not_found"


def test_unknown_item_is_404(alice_api):
    # Given no item 999999
    # When alice opens it / Then it is 404
    assert alice_api.get("/a/notebook/items/999999").status_code == 404


def test_item_of_another_app_is_404_under_the_wrong_slug(alice_api, make_item):
    # Given alice's rca item
    item = make_item(app_slug="rca")
    # When she opens it under the notebook slug / Then it is 404
    assert alice_api.get(f"/a/notebook/items/{item.pk}").status_code == 404


def test_someone_elses_item_is_404_to_whoever_neither_made_nor_pays_for_it(bob_api, make_item):
    # Given an item alice created and carol pays for
    item = make_item(created_by="alice", owner="carol")
    # When bob opens it
    response = bob_api.get(item_url(item))
    # Then it is 404 not_found
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_the_payer_of_someone_elses_item_reads_it_but_may_not_work_in_it(bob_api, make_item):
    # Given an item alice created and bob pays for
    item = make_item(created_by="alice", owner="bob")
    # When bob reads it and then tries to rename it
    read = bob_api.get(item_url(item))
    rename = bob_api.patch(item_url(item), {"title": "mine now"}, format="json")
    # Then he reads its title and disk, and renaming it is 403 payer_only, which says what he may do
    assert read.status_code == 200
    assert read.json()["title"] == item.title
    assert rename.status_code == 403
    assert rename.json()["error"] == "payer_only"
    assert "hand the bill back" in rename.json()["detail"]


def test_staff_see_anyones_item(api_client_for, make_item, settings):
    # Given carol is staff, and bob's item
    settings.WORKSPACE_MOCK_STAFF = ["carol"]
    item = make_item(created_by="bob")
    # When carol opens it / Then she may
    assert api_client_for("carol").get(item_url(item)).status_code == 200


def test_anonymous_caller_is_401(client, make_item, acting_as):
    # Given nobody signed in
    acting_as(None)
    # When a client lists items / Then it is 401
    assert client.get("/a/notebook/items", HTTP_ACCEPT="application/json").status_code == 401


def test_the_list_shows_only_my_items_of_that_app(alice_api, make_item, django_assert_max_num_queries):
    # Given thirty notebooks of alice's, one of bob's and an rca item of hers
    mine = [make_item(title=f"mine {n}") for n in range(30)]
    make_item(created_by="bob")
    make_item(app_slug="rca")
    # When she lists her notebooks
    with django_assert_max_num_queries(1):
        body = alice_api.get("/a/notebook/items").json()
    # Then only her thirty come back, newest first, in one query
    assert [row["id"] for row in body["results"]] == [item.pk for item in reversed(mine)]


def test_the_list_pages_by_keyset(alice_api, make_item):
    # Given five notebooks of alice's
    items = [make_item(title=f"n{n}") for n in range(5)]
    # When she reads the first page of two, then the page before its next_before key
    first = alice_api.get("/a/notebook/items?limit=2").json()
    second = alice_api.get(f"/a/notebook/items?limit=2&before={first['next_before']}").json()
    # Then the second page holds the third and second newest
    assert [row["id"] for row in second["results"]] == [items[2].pk, items[1].pk]


def test_bad_list_limit_is_400(alice_api):
    # Given alice, whose lists take a limit of at least 1
    # When she lists items with a limit of zero / Then it is 400
    assert alice_api.get("/a/notebook/items?limit=0").status_code == 400


def test_the_creator_may_ask_someone_else_to_pay(alice_api, make_item):
    # Given alice's notebook
    item = make_item()
    # When she names bob as owner
    response = alice_api.patch(item_url(item), {"owner": "bob"}, format="json")
    # Then the update succeeds, she still pays and bob is asked to
    assert response.status_code == 200
    assert (response.json()["owner"], response.json()["pending_owner"]) == ("alice", "bob")


def test_staff_may_change_the_owner(api_client_for, make_item, settings):
    # Given carol is staff, and bob's notebook
    settings.WORKSPACE_MOCK_STAFF = ["carol"]
    item = make_item(created_by="bob")
    # When carol names dave as owner / Then dave pays at once
    assert api_client_for("carol").patch(item_url(item), {"owner": "dave"}, format="json").json()["owner"] == "dave"


def test_anyone_else_changing_the_owner_is_refused_with_403(make_item):
    # Given alice's notebook
    item = make_item(created_by="alice")
    # When bob names himself as its owner through the item service / Then it is refused with 403
    with pytest.raises(Forbidden):
        services.item_update(item=item, actor=Actor("bob"), payer="bob")
    # Then alice still pays
    item.refresh_from_db()
    assert item.owner == "alice"


def test_a_blank_owner_falls_back_to_the_creator(alice_api, make_item):
    # Given an item alice created and bob pays for
    item = make_item(owner="bob")
    # When alice names an empty owner / Then she pays again herself
    assert alice_api.patch(item_url(item), {"owner": ""}, format="json").json()["owner"] == "alice"


def test_item_detail_costs_a_fixed_number_of_queries(alice_api, make_item, django_assert_max_num_queries):
    # Given alice's notebook
    item = make_item()
    # When she opens it / Then it costs a fixed number of queries
    with django_assert_max_num_queries(3):
        assert alice_api.get(item_url(item)).status_code == 200

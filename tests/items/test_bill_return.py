"""Ending an accepted handover (issue 25.14): whoever took over an item's bill can hand it back to
the creator, on My resources or through the API; so can the creator and staff; nobody else."""

from __future__ import annotations

import pytest

from workspace.items.models import Item

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


@pytest.fixture
def paid_by_carol(bob_api, api_client_for) -> Item:
    """bob's item whose bill carol accepted."""
    body = bob_api.post("/a/notebook/items", {"title": "Shared notes", "owner": "carol"}, format="json").json()
    assert api_client_for("carol").post(f"/me/resources/handovers/{body['id']}/accept").status_code == 200
    return Item.objects.get(pk=body["id"])


def _return(client, item: Item):
    return client.post(f"/me/resources/handovers/{item.pk}/return")


def _payer(item: Item) -> str:
    return Item.objects.get(pk=item.pk).payer


def test_the_payer_hands_the_bill_back_to_the_creator(api_client_for, paid_by_carol):
    # Given bob's item that carol pays for
    # When carol hands the bill back
    response = _return(api_client_for("carol"), paid_by_carol)
    # Then bob pays again
    assert response.json() == {"item_id": paid_by_carol.pk, "owner": "bob"}
    assert _payer(paid_by_carol) == "bob"


def test_the_creator_takes_the_bill_back(bob_api, paid_by_carol):
    # Given bob's item that carol pays for
    # When bob ends the handover himself
    response = _return(bob_api, paid_by_carol)
    # Then he pays again
    assert (response.status_code, _payer(paid_by_carol)) == (200, "bob")


def test_staff_end_a_handover(settings, api_client_for, paid_by_carol):
    # Given bob's item that carol pays for, and dave made staff
    settings.WORKSPACE_MOCK_STAFF = ["dave"]
    # When dave ends the handover
    response = _return(api_client_for("dave"), paid_by_carol)
    # Then bob pays again
    assert (response.status_code, _payer(paid_by_carol)) == (200, "bob")


@pytest.mark.parametrize("who", ["alice", "dave"])
def test_a_stranger_gets_404_and_the_payer_stays(api_client_for, paid_by_carol, who):
    # Given bob's item that carol pays for
    # When someone who neither pays, created it nor is staff hands it back
    response = _return(api_client_for(who), paid_by_carol)
    # Then it is 404 no_handover and carol still pays
    assert (response.status_code, response.json()["error"]) == (404, "no_handover")
    assert _payer(paid_by_carol) == "carol"


@pytest.mark.parametrize("item_id", ["999999", "99999999999999999999"])
def test_a_missing_item_is_404(bob_api, item_id):
    # When bob hands back an item that does not exist, or an id past the column / Then it is 404
    assert bob_api.post(f"/me/resources/handovers/{item_id}/return").status_code == 404


def test_an_item_its_creator_pays_for_has_nothing_to_hand_back(bob_api, make_item):
    # Given bob's own item, which he pays for
    item = make_item(created_by="bob")
    # When he hands its bill back / Then it is 404 and he still pays
    assert _return(bob_api, item).status_code == 404
    assert _payer(item) == "bob"


def test_a_handover_still_waiting_is_left_waiting(bob_api, api_client_for, paid_by_carol):
    # Given bob's item that carol pays for, and bob asking dave to take it over
    bob_api.patch(f"/a/notebook/items/{paid_by_carol.pk}", {"owner": "dave"}, format="json")
    # When carol hands the bill back
    _return(api_client_for("carol"), paid_by_carol)
    # Then bob pays and dave's request still waits for his answer
    item = Item.objects.get(pk=paid_by_carol.pk)
    assert (item.payer, item.pending_owner) == ("bob", "dave")


def test_my_resources_lists_what_the_payer_may_hand_back_with_a_button(api_client_for, paid_by_carol):
    # Given bob's item that carol pays for
    carol = api_client_for("carol")
    # When carol reads My resources, as JSON and as the page
    listed = carol.get("/me/resources").json()["paying_for"]
    page = carol.get("/my-resources", **HTML).content.decode()
    # Then the item is there with its creator, and the page offers to hand it back
    assert [{key: row[key] for key in ("item_id", "app_slug", "title", "created_by")} for row in listed] == [
        {"item_id": str(paid_by_carol.pk), "app_slug": "notebook", "title": "Shared notes", "created_by": "bob"}
    ]
    assert f'data-testid="return-{paid_by_carol.pk}"' in page
    assert "Hand back to bob" in page


def test_the_page_button_hands_the_bill_back_and_says_so(api_client_for, paid_by_carol):
    # Given bob's item that carol pays for
    carol = api_client_for("carol")
    # When carol presses Hand back on My resources, then presses it again
    first = carol.post(f"/my-resources/handovers/{paid_by_carol.pk}/return", follow=True, **HTML).content.decode()
    again = carol.post(f"/my-resources/handovers/{paid_by_carol.pk}/return", follow=True, **HTML).content.decode()
    # Then bob pays, the page says so, the item leaves her list, and the second press is refused
    assert _payer(paid_by_carol) == "bob"
    assert "bob pays for Shared notes again." in first
    assert 'data-testid="paying-for"' not in first
    assert "There is no handover of item" in again


def test_my_resources_lists_the_items_in_a_fixed_number_of_queries(
    api_client_for, make_item, django_assert_max_num_queries
):
    # Given twenty items of bob's that carol pays for
    for number in range(20):
        make_item(created_by="bob", owner="carol", title=f"Item {number}")
    carol = api_client_for("carol")
    # When carol reads My resources / Then all are listed, whatever their number, in a bounded number of queries
    with django_assert_max_num_queries(8):
        listed = carol.get("/me/resources").json()["paying_for"]
    assert len(listed) == 20

"""Nobody is billed without consent (docs/ARCHITECTURE.md §5, issue 12.3): handing an item's bill over waits
for the addressee, who answers on My resources; the payer always sees the title and can close."""

from __future__ import annotations

import pytest

from collab.actor import Actor
from quotas.models import SandboxActivity
from tests.fixtures.items import item_url
from workspace.items.models import Item

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


def test_a_non_staff_creator_naming_someone_else_only_asks_them(bob_api):
    # Given bob, not staff
    # When he creates an item naming carol as owner
    body = bob_api.post("/a/notebook/items", {"title": "Mine", "owner": "carol"}, format="json").json()
    # Then bob pays and carol is asked
    item = Item.objects.get(pk=body["id"])
    assert (item.owner, item.pending_owner, item.pending_owner_requested_by) == ("bob", "carol", "bob")


def test_the_addressee_sees_the_request_on_my_resources_and_accepting_moves_the_bill(bob_api, api_client_for):
    # Given bob's item that asks carol to pay
    body = bob_api.post("/a/notebook/items", {"title": "Shared notes", "owner": "carol"}, format="json").json()
    carol = api_client_for("carol")
    # When carol looks at My resources and accepts
    listed = carol.get("/me/resources").json()["handovers"]
    page = carol.get("/my-resources", **HTML).content.decode()
    answer = carol.post(f"/me/resources/handovers/{body['id']}/accept")
    # Then she saw it with who asked, and now pays
    assert [(h["item_id"], h["title"], h["requested_by"]) for h in listed] == [(str(body["id"]), "Shared notes", "bob")]
    assert "Shared notes" in page
    assert answer.json() == {"item_id": body["id"], "owner": "carol", "accepted": True}
    item = Item.objects.get(pk=body["id"])
    assert (item.owner, item.pending_owner) == ("carol", "")


def test_declining_leaves_the_creator_paying_and_clears_the_request(bob_api, api_client_for):
    # Given bob's item that asks carol to pay
    body = bob_api.post("/a/notebook/items", {"title": "x", "owner": "carol"}, format="json").json()
    # When carol declines
    answer = api_client_for("carol").post(f"/me/resources/handovers/{body['id']}/decline")
    # Then bob still pays and nothing waits
    item = Item.objects.get(pk=body["id"])
    assert answer.json()["owner"] == "bob"
    assert (item.owner, item.pending_owner) == ("bob", "")


@pytest.mark.parametrize("who", ["bob", "dave"])
def test_only_the_addressee_can_answer_a_handover(bob_api, api_client_for, who):
    # Given bob's item that asks carol to pay
    body = bob_api.post("/a/notebook/items", {"title": "x", "owner": "carol"}, format="json").json()
    # When the creator or a stranger tries to accept for her
    answer = api_client_for(who).post(f"/me/resources/handovers/{body['id']}/accept")
    # Then it is 404 and nothing changes
    assert answer.status_code == 404
    assert answer.json()["error"] == "no_handover"
    assert Item.objects.get(pk=body["id"]).owner == "bob"


@pytest.mark.parametrize("item_id", ["999999", "99999999999999999999"])
def test_answering_a_handover_of_no_item_is_404(api_client_for, item_id):
    # Given no such item; When carol accepts it
    answer = api_client_for("carol").post(f"/me/resources/handovers/{item_id}/accept")
    # Then it is 404, never a server error
    assert answer.status_code == 404


def test_staff_assign_the_bill_directly(settings, api_client_for, make_item):
    # Given carol is staff and bob's item
    settings.WORKSPACE_MOCK_STAFF = ["carol"]
    item = make_item(created_by="bob")
    # When carol names dave as owner
    body = api_client_for("carol").patch(item_url(item), {"owner": "dave"}, format="json").json()
    # Then dave pays at once
    assert (body["owner"], body["pending_owner"]) == ("dave", None)


def test_naming_oneself_again_withdraws_a_waiting_request(bob_api):
    # Given bob asked carol to pay
    body = bob_api.post("/a/notebook/items", {"title": "x", "owner": "carol"}, format="json").json()
    item = Item.objects.get(pk=body["id"])
    # When bob names himself again
    answer = bob_api.patch(item_url(item), {"owner": "bob"}, format="json").json()
    # Then nothing waits for carol
    assert (answer["owner"], answer["pending_owner"]) == ("bob", None)
    assert not Item.objects.filter(pending_owner="carol").exists()


def test_the_payer_sees_the_title_with_a_link_to_the_item_and_can_close_the_sandbox(bob_api, api_client_for, make_item):
    # Given bob's item paid for by carol (accepted), with a live sandbox
    body = bob_api.post("/a/notebook/items", {"title": "Paid by carol", "owner": "carol"}, format="json").json()
    carol = api_client_for("carol")
    carol.post(f"/me/resources/handovers/{body['id']}/accept")
    item = Item.objects.get(pk=body["id"])
    bob_api.post(item_url(item, "/exec"), {"command": "true"}, format="json")
    # When carol looks at My resources
    live = carol.get("/me/resources").json()["live"]
    # Then she sees the title with a link to the item's page (where she frees its disk), and may close it
    assert [(row["title"], row["url"]) for row in live] == [("Paid by carol", item_url(item))]
    assert carol.delete(f"/me/resources/live/{item.pk}").status_code in {200, 204}
    assert not SandboxActivity.objects.filter(is_deleted=False).exists()


def test_a_member_of_an_investigation_cannot_move_its_bill(api_client_for):
    # Given alice's investigation with bob as member
    from workspace.investigations.services import investigation_create

    item = investigation_create(title="outage", actor=Actor("alice"), members=["bob"]).item
    # When bob names himself or carol as owner
    answers = [
        api_client_for("bob").patch(item_url(item), {"owner": owner}, format="json").status_code
        for owner in ("bob", "carol")
    ]
    # Then both are refused and alice still pays
    assert answers == [403, 403]
    item.refresh_from_db()
    assert (item.payer, item.pending_owner) == ("alice", "")


def test_the_handover_page_answers_with_the_sites_messages(bob_api, api_client_for):
    # Given bob asked carol to pay
    body = bob_api.post("/a/notebook/items", {"title": "Notes", "owner": "carol"}, format="json").json()
    carol = api_client_for("carol")
    # When carol accepts from the page, then tries again
    first = carol.post(f"/my-resources/handovers/{body['id']}/accept", follow=True, **HTML)
    again = carol.post(f"/my-resources/handovers/{body['id']}/accept", follow=True, **HTML)
    # Then the first says she pays and the second that nothing waits
    assert "You pay for Notes." in first.content.decode()
    assert "No handover of item" in again.content.decode()

"""An item's API views fetch and authorise their item once, for the right each method needs
(workspace/items/web.py `ItemApiView`): what a route answers that is not about the item (OPTIONS,
a method it does not have) stays as it was, and HEAD needs what GET needs."""

from __future__ import annotations

import pytest

from tests.fixtures.items import item_url
from workspace.items.models import Item

pytestmark = pytest.mark.django_db


@pytest.fixture
def paid_by_carol(bob_api, api_client_for) -> Item:
    """bob's notebook, whose bill carol accepted: she may tend it, not use it."""
    body = bob_api.post("/a/notebook/items", {"title": "Bob's notes", "owner": "carol"}, format="json").json()
    assert api_client_for("carol").post(f"/me/resources/handovers/{body['id']}/accept").status_code == 200
    return Item.objects.get(pk=body["id"])


def test_a_method_an_item_route_does_not_have_is_405_for_a_stranger_too(api_client_for, make_item):
    # Given alice's notebook
    item = make_item(created_by="alice")
    # When a stranger sends PUT to its exec list, which answers GET alone
    response = api_client_for("dave").put(item_url(item, "/execs"), {}, format="json")
    # Then the route says it has no such method, as it does for anyone
    assert response.status_code == 405


def test_options_on_an_item_route_answers_about_the_route_without_reading_the_item(api_client_for, make_item):
    # Given alice's notebook
    item = make_item(created_by="alice")
    # When a stranger asks OPTIONS of its file list
    response = api_client_for("dave").options(item_url(item, "/files"))
    # Then the route describes itself, saying nothing of the item
    assert response.status_code == 200
    assert str(item.pk) not in response.content.decode()


def test_the_payer_reads_an_item_with_head_as_with_get(api_client_for, paid_by_carol):
    # Given bob's notebook that carol pays for (GET of the item needs only the payer's right)
    carol = api_client_for("carol")
    # When she asks HEAD and GET of it
    head, get = carol.head(item_url(paid_by_carol)), carol.get(item_url(paid_by_carol))
    # Then both are answered
    assert (head.status_code, get.status_code) == (200, 200)


def test_the_payer_asking_for_a_use_is_403_and_a_stranger_404(api_client_for, paid_by_carol):
    # Given bob's notebook that carol pays for
    # When carol and a stranger ask for its chat (a use of it)
    carol = api_client_for("carol").get(item_url(paid_by_carol, "/messages"))
    stranger = api_client_for("dave").get(item_url(paid_by_carol, "/messages"))
    # Then carol is told what she may do (403 payer_only) and the stranger learns nothing (404)
    assert (carol.status_code, carol.json()["error"]) == (403, "payer_only")
    assert stranger.status_code == 404

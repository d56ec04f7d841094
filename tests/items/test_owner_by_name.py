"""An item's owner is named the way a new user names people (issue 47.4): by user id, or by a display
name that one person alone has; the Owner fields offer the directory as the person types."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collab.actor import Actor
from collab.errors import Invalid
from collab.identity import MockDirectory
from tests.fixtures.items import item_url
from workspace.items import services
from workspace.items.access import app_or_404
from workspace.items.models import Item

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


@pytest.mark.parametrize("typed", ["carol", "Carol Nguyen", "  carol   NGUYEN "])
def test_an_owner_typed_as_an_id_or_a_display_name_is_stored_as_the_id(typed: str) -> None:
    # Given bob, who is not staff
    # When he creates a notebook naming carol as owner, by id or by name in any case and spacing
    item = services.item_create(app=app_or_404("notebook"), title="Shared", payer=typed, actor=Actor("bob"))
    # Then carol, by her id, is asked to pay
    assert (item.owner, item.pending_owner) == ("bob", "carol")


def test_an_unknown_name_is_refused_and_nothing_is_stored() -> None:
    # Given no one called "Carla Nguyen"
    # When bob names her as owner
    with pytest.raises(Invalid) as refused:
        services.item_create(app=app_or_404("notebook"), title="Shared", payer="Carla Nguyen", actor=Actor("bob"))
    # Then the refusal says she is not in the directory, and no item exists
    assert refused.value.error == "unknown_user"
    assert "'Carla Nguyen' is not in the user directory." in refused.value.detail
    assert not Item.objects.exists()


def test_a_name_two_people_share_is_refused_naming_their_ids(monkeypatch, tmp_path: Path, make_item) -> None:
    # Given a directory with two people called Sam Lee, and bob's notebook
    users = [{"id": f"sam{n}", "name": "Sam Lee"} for n in (1, 2)] + [{"id": "bob", "name": "Bob Okafor"}]
    (tmp_path / "users.json").write_text(json.dumps(users))
    directory = MockDirectory(tmp_path / "users.json")
    monkeypatch.setattr(services, "get_user_directory", lambda: directory)
    monkeypatch.setattr(services, "unknown_user_ids", lambda ids: [i for i in ids if directory.get(i) is None])
    item = make_item(created_by="bob", owner="bob")
    # When bob names "Sam Lee" as owner
    with pytest.raises(Invalid) as refused:
        services.item_update(item=item, actor=Actor("bob"), payer="Sam Lee")
    # Then he is asked for the id of the one he means, and nothing changed
    assert refused.value.error == "ambiguous_user"
    assert "(sam1, sam2)" in refused.value.detail
    item.refresh_from_db()
    assert (item.owner, item.pending_owner) == ("bob", "")


def test_the_item_page_form_takes_a_display_name(client, make_item) -> None:
    # Given alice's notebook
    item = make_item()
    # When she saves its details with "Carol Nguyen" as owner
    response = client.post(item_url(item), {"title": item.title, "owner": "Carol Nguyen"}, **HTML)
    # Then carol, by her id, is asked to pay, and the page says so
    item.refresh_from_db()
    assert response.status_code == 302
    assert (item.owner, item.pending_owner) == ("alice", "carol")
    assert "waiting for carol to accept paying" in client.get(item_url(item), **HTML).content.decode()


def test_the_new_item_form_refuses_an_unknown_name_on_the_page(client) -> None:
    # Given alice on the notebook items page
    # When she creates an item naming someone the directory does not know
    response = client.post("/a/notebook/items", {"title": "Shared", "owner": "Carla Nguyen"}, **HTML)
    # Then the page answers 400 with the clear refusal by the form, which keeps what she typed,
    # and nothing is stored
    page = response.content.decode()
    assert response.status_code == 400
    assert "<strong>Not created:</strong>" in page
    assert "&#x27;Carla Nguyen&#x27; is not in the user directory." in page
    assert 'value="Shared"' in page
    assert 'value="Carla Nguyen"' in page
    assert not Item.objects.exists()


def test_both_owner_fields_offer_the_people_picker(client, make_item) -> None:
    # Given alice's notebook
    item = make_item()
    # When her browser opens the items page and the item page
    pages = [client.get(url, **HTML).content.decode() for url in ("/a/notebook/items", item_url(item))]
    # Then each Owner field is a people picker over the user directory
    for page, field in zip(pages, ("item-owner", "edit-owner"), strict=True):
        assert f'id="{field}"' in page
        assert 'data-people-picker data-users-url="/users"' in page
        assert "js/people-picker.js" in page


def test_the_api_takes_a_display_name_and_refuses_an_unknown_one_with_json(bob_api) -> None:
    # Given bob, an API client
    # When he creates an item naming carol by name, and one naming nobody the directory knows
    named = bob_api.post("/a/notebook/items", {"title": "Shared", "owner": "Carol Nguyen"}, format="json")
    unknown = bob_api.post("/a/notebook/items", {"title": "Other", "owner": "Carla Nguyen"}, format="json")
    # Then the first asks carol by her id; the second is a 400 saying why, and stores nothing
    assert named.status_code == 201
    assert Item.objects.get(pk=named.json()["id"]).pending_owner == "carol"
    assert unknown.status_code == 400
    assert unknown.json() == {"error": "unknown_user", "detail": "'Carla Nguyen' is not in the user directory."}
    assert list(Item.objects.values_list("title", flat=True)) == ["Shared"]


def test_an_owner_longer_than_any_id_or_name_is_refused_without_echoing_it(client) -> None:
    # Given alice on the notebook items page
    # When she (or a script) sends an owner of 100,000 characters
    response = client.post("/a/notebook/items", {"title": "Shared", "owner": "x" * 100_000}, **HTML)
    # Then the page answers 400 saying how long an owner may be, shows back no more than a field
    # takes, and nothing is stored
    page = response.content.decode()
    assert response.status_code == 400
    assert "at most 150 characters" in page
    assert len(page) < 50_000
    assert not Item.objects.exists()

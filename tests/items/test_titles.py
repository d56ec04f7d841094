"""One title rule for items and investigations, in the service: blank or over 200 characters is a 400, never cut."""

from __future__ import annotations

import pytest

from collab.actor import Actor
from collab.errors import DomainError, Invalid
from workspace.investigations.services import investigation_create
from workspace.items import services
from workspace.items.access import app_or_404
from workspace.items.models import Item

pytestmark = pytest.mark.django_db

TOO_LONG = "t" * 201
HTML = {"HTTP_ACCEPT": "text/html", "HTTP_X_USER_ID": "alice"}


def test_the_service_refuses_a_title_past_200_characters_instead_of_cutting_it():
    # Given the notebook app and alice
    # When a caller (a command, admin, a page) creates an item with 201 characters of title
    with pytest.raises(Invalid) as refused:
        services.item_create(app=app_or_404("notebook"), title=TOO_LONG, actor=Actor("alice"))

    # Then it is refused as invalid, naming the limit, and nothing is stored
    assert refused.value.error == "title_too_long"
    assert "at most 200 characters; this one has 201" in str(refused.value.detail)
    assert not Item.objects.exists()


def test_a_title_of_exactly_200_characters_is_kept_whole():
    # Given the notebook app and alice
    # When an item is created with a 200-character title
    item = services.item_create(app=app_or_404("notebook"), title="t" * 200, actor=Actor("alice"))

    # Then all of it is stored
    assert len(item.title) == 200


def test_the_items_page_says_why_a_long_title_is_refused_and_stores_nothing(client):
    # Given alice's browser on the items page
    # When a person submits the new-item form with 201 characters of title
    response = client.post("/a/notebook/items", {"title": TOO_LONG}, follow=True, **HTML)

    # Then the page says why, and no item was made with a shortened title
    assert "A title has at most 200 characters" in response.content.decode()
    assert not Item.objects.exists()


def test_the_items_page_refuses_a_blank_title_through_the_same_rule(client):
    # Given alice's browser on the items page
    # When the form is sent with only spaces
    response = client.post("/a/notebook/items", {"title": "   "}, follow=True, **HTML)

    # Then it is the service's message
    assert "An item needs a title." in response.content.decode()
    assert not Item.objects.exists()


def test_an_investigation_with_a_long_title_is_refused_whole(alice_api):
    # Given alice, and a title of 201 characters
    # When alice creates an investigation with 201 characters of title, through the service
    with pytest.raises(DomainError) as refused:
        investigation_create(title=TOO_LONG, actor=Actor("alice"))

    # Then it is refused, not cut
    assert refused.value.error == "title_too_long"
    assert not Item.objects.exists()


def test_renaming_an_item_past_200_characters_is_refused_and_keeps_the_old_title(alice_api, make_item):
    # Given an item
    item = make_item(title="Short")

    # When the service renames it with 201 characters
    with pytest.raises(DomainError):
        services.item_update(item=item, actor=Actor("alice"), title=TOO_LONG)

    # Then the stored title is unchanged
    item.refresh_from_db()
    assert item.title == "Short"


def test_an_item_create_that_dies_after_its_insert_leaves_no_item(monkeypatch):
    # Given the insert succeeds and the request dies right after it
    original_save = Item.save

    def save_then_die(self: Item, *args: object, **kwargs: object) -> None:
        original_save(self, *args, **kwargs)
        raise RuntimeError("killed halfway")

    monkeypatch.setattr(Item, "save", save_then_die)

    # When an item is created
    with pytest.raises(RuntimeError):
        services.item_create(app=app_or_404("notebook"), title="Half", actor=Actor("alice"))

    # Then the transaction took the row back
    monkeypatch.undo()
    assert not Item.objects.exists()

"""A row id past the database's key range is a 404 on every route that takes one, never a 500."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

HUGE_IDS = [str(2**63), str(10**23), "99999999999999999999999999999999999999", "0"]

ROUTES = [
    ("get", "/a/notebook/items/{id}"),
    ("get", "/a/notebook/items/{id}/files"),
    ("get", "/a/notebook/items/{id}/files/notes.txt"),
    ("put", "/a/notebook/items/{id}/files/notes.txt"),
    ("delete", "/a/notebook/items/{id}/files/notes.txt"),
    ("post", "/a/notebook/items/{id}/exec"),
    ("get", "/a/notebook/items/{id}/sandbox"),
    ("get", "/a/notebook/items/{id}/messages"),
    ("get", "/a/notebook/items/{id}/workflows/abc"),
    ("get", "/investigations/{id}"),
    ("post", "/investigations/{id}/status"),
    ("post", "/investigations/{id}/mentions"),
    ("post", "/notifications/{id}/read"),
    ("delete", "/me/tokens/{id}"),
    ("post", "/me/resources/handovers/{id}/accept"),
    ("post", "/me/resources/handovers/{id}/decline"),
]


@pytest.fixture
def client() -> Client:
    return Client(raise_request_exception=False, HTTP_X_USER_ID="bob")


@pytest.mark.parametrize("huge", HUGE_IDS)
@pytest.mark.parametrize(("method", "template"), ROUTES)
def test_an_id_outside_the_key_range_is_a_json_404(client, method, template, huge):
    # Given bob, on a route that takes a row id
    # When an API client names a row id no database key can hold
    response = getattr(client, method)(template.format(id=huge), HTTP_ACCEPT="application/json")

    # Then it is the ordinary not-found answer
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


@pytest.mark.parametrize(
    "path", ["/a/notebook/items/{id}", "/investigations/{id}", "/my-resources/handovers/{id}/accept"]
)
def test_a_browser_gets_the_sites_404_page_for_an_id_outside_the_key_range(client, path):
    # Given bob in a browser
    # When a browser opens a page with a row id past the key range
    response = client.get(path.format(id=10**23), HTTP_ACCEPT="text/html")

    # Then it is the site's own 404 page
    assert response.status_code == 404
    assert "<!doctype html>" in response.content.decode().lower()


def test_the_largest_id_the_database_holds_is_an_ordinary_miss(client):
    # Given bob, and no investigation with that id
    # When a client names the largest possible key, which does not exist
    response = client.get(f"/investigations/{2**63 - 1}", HTTP_ACCEPT="application/json")

    # Then it is looked up and not found: a 404, not a 500
    assert response.status_code == 404

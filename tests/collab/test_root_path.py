"""Spec Area B.6: the whole site under a configurable root path (here `/ws`)."""

from __future__ import annotations

import re

import pytest
from django.test import Client, override_settings

from collab.web import rooted
from tests.factories import make_notification

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.collab.rooted_urls")]

HTML = {"HTTP_ACCEPT": "text/html,application/xhtml+xml,*/*;q=0.8"}
UNDER_WS = override_settings(WORKSPACE_ROOT_PATH="/ws", STATIC_URL="/ws/static/")
URL_ATTRIBUTE = re.compile(rb'(href|action|src)="([^"#]*)"')


def urls_on(content: bytes, attributes: tuple[bytes, ...] = (b"href", b"action", b"src")) -> set[str]:
    return {url.decode() for name, url in URL_ATTRIBUTE.findall(content) if name in attributes and url.startswith(b"/")}


@UNDER_WS
def test_every_link_form_and_asset_on_the_home_page_stays_under_the_root(client: Client) -> None:
    # Given the site under /ws and a notification that links to a chat
    make_notification(link="/kb/chats/4")

    # When the home page is fetched
    found = urls_on(client.get("/ws/", **HTML).content)

    # Then every link, form action and asset on it starts with /ws/, the stylesheet included
    assert found
    assert all(url.startswith("/ws/") for url in found), sorted(found)
    assert "/ws/static/css/workspace.css" in found


@UNDER_WS
def test_following_every_page_link_under_the_root_succeeds(client: Client) -> None:
    # Given the page links of the home page under /ws, the notifications page among them
    links = urls_on(client.get("/ws/", **HTML).content, attributes=(b"href",))
    pages = [url for url in links if "/static/" not in url and "/admin" not in url]
    assert "/ws/notifications" in pages

    # When each is followed / Then every one answers 200
    for url in pages:
        assert client.get(url, **HTML).status_code == 200, url


@UNDER_WS
def test_api_answers_under_the_root_and_not_at_the_bare_path(client: Client) -> None:
    # Given the site under /ws
    # When the API is asked under the root / Then it answers as alice
    assert client.get("/ws/me").json()["id"] == "alice"
    # When it is asked at the bare path / Then it is 404
    assert client.get("/me").status_code == 404


@UNDER_WS
def test_form_redirects_and_notification_links_stay_under_the_root(client: Client) -> None:
    # Given the site under /ws and a notification that links to an investigation
    notification = make_notification(link="/investigations/9")

    # When the notifications page is opened, and the notification marked read from it
    page = client.get("/ws/notifications", **HTML)
    read = client.post(f"/ws/notifications/{notification.id}/read", {}, **HTML)

    # Then its link and the redirect both stay under /ws
    assert b'href="/ws/investigations/9"' in page.content
    assert read["Location"] == "/ws/notifications"


@UNDER_WS
@override_settings(
    WORKSPACE_USER_DIRECTORY="collab.identity.DjangoUserDirectory",
    WORKSPACE_CURRENT_USER_PROVIDER="collab.identity.RequestUserProvider",
)
def test_login_redirect_stays_under_the_root(client: Client) -> None:
    # Given the site under /ws with real sign-in and nobody signed in
    # When a page is opened
    response = client.get("/ws/notifications", **HTML)

    # Then the redirect to the login page and its next address are under /ws
    assert response["Location"] == "/ws/accounts/login/?next=/ws/notifications"


@UNDER_WS
def test_spec_links_are_placed_under_the_root() -> None:
    # Given the site under /ws
    # When a spec link is rooted / Then it gains the prefix
    assert rooted("/kb/chats/7") == "/ws/kb/chats/7"
    # When an empty link is rooted / Then it stays empty
    assert rooted("") == ""

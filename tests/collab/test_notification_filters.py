"""Filtering notifications by unread or all and by kind: the same selector behind the page and the API."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from collab.models import Notification
from tests.factories import make_notification

pytestmark = pytest.mark.django_db

HTML = {"HTTP_ACCEPT": "text/html,application/xhtml+xml,*/*;q=0.8"}


@pytest.fixture
def mixed_inbox() -> None:
    """alice's unread mention, read mention, unread share, and bob's unread mention."""
    make_notification(kind="mention", title="unread mention")
    make_notification(kind="mention", title="read mention", read=True)
    make_notification(kind="share", title="unread share")
    make_notification(recipient="bob", kind="mention", title="bob's mention")


def _titles(response) -> list[str]:
    return [row["title"] for row in response.json()["results"]]


def test_the_api_lists_only_unread_notifications_when_asked(alice_api: APIClient, mixed_inbox) -> None:
    # Given alice's mixed inbox
    # When she asks for unread ones only
    response = alice_api.get("/notifications?unread=true")

    # Then only her unread ones come, newest first
    assert _titles(response) == ["unread share", "unread mention"]


def test_the_api_lists_one_kind_when_asked(alice_api: APIClient, mixed_inbox) -> None:
    # Given alice's mixed inbox
    # When she asks for mentions
    response = alice_api.get("/notifications?kind=mention")

    # Then her mentions come, unread first, and the unread count still counts everything
    assert _titles(response) == ["unread mention", "read mention"]
    assert response.json()["unread_count"] == 2


def test_the_api_combines_the_two_filters(alice_api: APIClient, mixed_inbox) -> None:
    # Given alice's mixed inbox
    # When she asks for unread mentions
    response = alice_api.get("/notifications?unread=true&kind=mention")

    # Then only the unread mention comes
    assert _titles(response) == ["unread mention"]


def test_an_unknown_kind_is_a_clear_400(alice_api: APIClient) -> None:
    # Given alice
    # When she filters by a kind that does not exist
    response = alice_api.get("/notifications?kind=gossip")

    # Then it is a 400 that names the field
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert "kind" in response.json()["detail"]


def test_each_filter_has_its_own_etag(alice_api: APIClient, mixed_inbox) -> None:
    # Given the ETag of alice's whole inbox
    etag = alice_api.get("/notifications")["ETag"]

    # When she polls the unread filter with it
    response = alice_api.get("/notifications?unread=true", HTTP_IF_NONE_MATCH=etag)

    # Then she gets the filtered list, not a 304 meant for another list
    assert response.status_code == 200
    assert _titles(response) == ["unread share", "unread mention"]


def test_the_page_shows_unread_mentions_when_filtered(client: Client, mixed_inbox) -> None:
    # Given alice's mixed inbox
    # When her browser opens the page filtered to unread mentions
    response = client.get("/notifications?unread=true&kind=mention", **HTML)

    # Then only that notification shows, and both chosen filters are marked current
    assert b"unread mention" in response.content
    assert b">read mention<" not in response.content
    assert b"unread share" not in response.content
    assert b'href="/notifications?unread=true&amp;kind=mention" aria-current="page">Unread<' in response.content
    assert b'aria-current="page">Mentions<' in response.content


def test_the_page_offers_the_kinds_the_service_produces(client: Client) -> None:
    # Given alice
    # When her browser opens the notifications page
    response = client.get("/notifications", **HTML)

    # Then it offers every kind, mentions, shares and status changes, "All" being current
    for label in (b"Every kind", b"Mentions", b"Shares", b"Status changes"):
        assert b">" + label + b"<" in response.content
    assert b'href="/notifications" aria-current="page">All<' in response.content


def test_the_page_says_so_when_nothing_matches(client: Client) -> None:
    # Given alice with only a read share
    make_notification(kind="share", title="old share", read=True)

    # When she filters to unread
    response = client.get("/notifications?unread=true", **HTML)

    # Then the page says nothing matches and how to see everything
    assert b"Nothing matches this filter" in response.content
    assert b"old share" not in response.content


def test_a_filter_the_page_cannot_read_shows_everything_and_says_why(client: Client, mixed_inbox) -> None:
    # Given alice's mixed inbox
    # When her browser opens the page with a kind that does not exist
    response = client.get("/notifications?kind=gossip", **HTML)

    # Then the page shows everything, with a message naming the filter, and is no error
    assert response.status_code == 200
    assert b"That filter cannot be read (kind:" in response.content
    assert b"unread share" in response.content


def test_the_filtered_page_costs_the_same_queries_at_any_size(client: Client, django_assert_max_num_queries) -> None:
    # Given alice with 300 notifications of two kinds
    for number in range(300):
        make_notification(kind="mention" if number % 2 else "share", read=number % 3 == 0)

    # When her browser opens the page filtered to unread mentions / Then a handful of queries serve it
    with django_assert_max_num_queries(8):
        response = client.get("/notifications?unread=true&kind=mention", **HTML)
    assert response.status_code == 200
    assert Notification.objects.filter(recipient="alice").count() == 300

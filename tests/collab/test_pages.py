"""The base layout and the notifications page a person reads and marks read."""

from __future__ import annotations

import pytest
from django.test import Client

from collab.models import Notification
from tests.factories import make_notification

pytestmark = pytest.mark.django_db

HTML = {"HTTP_ACCEPT": "text/html,application/xhtml+xml,*/*;q=0.8"}


def test_notifications_path_serves_a_page_to_browsers(client: Client) -> None:
    make_notification(title="You were mentioned in the outage review")

    response = client.get("/notifications", **HTML)

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert b"You were mentioned in the outage review" in response.content


def test_header_bell_shows_the_unread_count(client: Client) -> None:
    make_notification()
    make_notification()
    make_notification(read=True)

    response = client.get("/", **HTML)

    assert b'data-testid="bell-count">2<' in response.content


def test_header_switcher_lists_the_directory_in_mock_mode(client: Client) -> None:
    response = client.get("/", **HTML)

    assert b'data-testid="user-switch"' in response.content
    assert b"Carol Nguyen" in response.content


def test_mark_read_form_marks_it_and_returns_to_the_page(client: Client) -> None:
    notification = make_notification()

    response = client.post(f"/notifications/{notification.id}/read", {"next": "/notifications"}, **HTML)

    notification.refresh_from_db()
    assert response.status_code == 302
    assert response["Location"] == "/notifications"
    assert notification.read is True


def test_open_button_marks_read_and_follows_the_link(client: Client) -> None:
    notification = make_notification(link="/kb/chats/12")

    response = client.post(f"/notifications/{notification.id}/read", {"follow": "1"}, **HTML)

    assert response["Location"] == "/kb/chats/12"
    assert Notification.objects.get(pk=notification.pk).read is True


def test_mark_all_read_form_clears_the_bell(client: Client) -> None:
    make_notification()
    make_notification()

    response = client.post("/notifications/read-all", {}, follow=True, **HTML)

    assert b'data-testid="bell-count">0<' in response.content
    assert b"Marked 2 notifications read." in response.content


def test_a_page_form_without_csrf_token_is_refused() -> None:
    notification = make_notification()
    client = Client(enforce_csrf_checks=True)

    response = client.post(f"/notifications/{notification.id}/read", {}, **HTML)

    assert response.status_code == 403
    assert Notification.objects.get(pk=notification.pk).read is False


def test_someone_elses_notification_is_not_found_from_the_page(client: Client) -> None:
    notification = make_notification(recipient="bob")

    response = client.post(f"/notifications/{notification.id}/read", {}, **HTML)

    assert response.status_code == 404


def test_unknown_page_is_a_friendly_404_for_browsers(client: Client) -> None:
    response = client.get("/no/such/page", **HTML)

    assert response.status_code == 404
    assert b"There is nothing at" in response.content


def test_unknown_path_is_a_json_404_for_api_clients(client: Client) -> None:
    response = client.get("/no/such/thing")

    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_notification_times_read_as_words(client: Client, clock) -> None:
    make_notification(title="fresh")
    clock.advance(hours=3)
    make_notification(title="newer")

    content = client.get("/notifications", **HTML).content

    assert b"3\xc2\xa0hours ago" in content
    assert b"just now" in content

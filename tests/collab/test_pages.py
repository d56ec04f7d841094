"""The base layout and the notifications page a person reads and marks read."""

from __future__ import annotations

import pytest
from django.test import Client

from collab.models import Notification
from tests.factories import make_notification

pytestmark = pytest.mark.django_db

HTML = {"HTTP_ACCEPT": "text/html,application/xhtml+xml,*/*;q=0.8"}


def test_notifications_path_serves_a_page_to_browsers(client: Client) -> None:
    # Given alice's notification about the outage review
    make_notification(title="You were mentioned in the outage review")

    # When her browser opens /notifications
    response = client.get("/notifications", **HTML)

    # Then it gets an HTML page that shows the notification
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert b"You were mentioned in the outage review" in response.content


def test_header_bell_shows_the_unread_count(client: Client) -> None:
    # Given two unread notifications for alice and one read
    make_notification()
    make_notification()
    make_notification(read=True)

    # When her browser opens the home page
    response = client.get("/", **HTML)

    # Then the header bell counts two
    assert b'data-testid="bell-count">2<' in response.content


def test_header_switcher_lists_the_directory_in_mock_mode(client: Client) -> None:
    # Given mock identity
    # When a browser opens the home page
    response = client.get("/", **HTML)

    # Then the header holds the user switcher, listing the directory's people
    assert b'data-testid="user-switch"' in response.content
    assert b"Carol Nguyen" in response.content


def test_mark_read_form_marks_it_and_returns_to_the_page(client: Client) -> None:
    # Given alice's unread notification
    notification = make_notification()

    # When she marks it read with the page's form
    response = client.post(f"/notifications/{notification.id}/read", {"next": "/notifications"}, **HTML)

    # Then she is sent back to the page and it is read
    notification.refresh_from_db()
    assert response.status_code == 302
    assert response["Location"] == "/notifications"
    assert notification.read is True


def test_a_notification_is_a_real_link_to_its_target_that_knows_how_to_mark_it_read(client: Client) -> None:
    # Given alice's unread notification that links to a chat
    notification = make_notification(link="/kb/chats/12", title="Chat shared with you")

    # When she opens her notifications
    response = client.get("/notifications", **HTML)

    # Then its title is a plain link to the chat (middle-click and copy work), carrying the
    # POST endpoint that workspace.js calls when it is followed; opening the page marked nothing
    link = (
        f'<a class="notification-title" href="/kb/chats/12" data-testid="notification-link" '
        f'data-mark-read-url="/notifications/{notification.id}/read">Chat shared with you</a>'
    )
    assert link.encode() in response.content
    assert Notification.objects.get(pk=notification.pk).read is False


def test_a_read_notification_links_without_marking_anything(client: Client) -> None:
    # Given alice's read notification that links to a chat
    make_notification(link="/kb/chats/12", title="Chat shared with you", read=True)

    # When she opens her notifications
    response = client.get("/notifications", **HTML)

    # Then the link carries no mark-read endpoint
    assert b'href="/kb/chats/12"' in response.content
    assert b"data-mark-read-url" not in response.content


def test_mark_all_read_form_clears_the_bell(client: Client) -> None:
    # Given two unread notifications for alice
    make_notification()
    make_notification()

    # When she presses mark all read and follows the redirect
    response = client.post("/notifications/read-all", {}, follow=True, **HTML)

    # Then the bell shows zero and the page says two were marked
    assert b'data-testid="bell-count">0<' in response.content
    assert b"Marked 2 notifications read." in response.content


def test_a_page_form_without_csrf_token_is_refused() -> None:
    # Given alice's unread notification and a browser that checks CSRF
    notification = make_notification()
    client = Client(enforce_csrf_checks=True)

    # When a form marks it read without a CSRF token
    response = client.post(f"/notifications/{notification.id}/read", {}, **HTML)

    # Then it is 403 and the notification stays unread
    assert response.status_code == 403
    assert Notification.objects.get(pk=notification.pk).read is False


def test_someone_elses_notification_is_not_found_from_the_page(client: Client) -> None:
    # Given bob's notification
    notification = make_notification(recipient="bob")

    # When alice marks it read from the page
    response = client.post(f"/notifications/{notification.id}/read", {}, **HTML)

    # Then it is 404
    assert response.status_code == 404


def test_unknown_page_is_a_friendly_404_for_browsers(client: Client) -> None:
    # Given no page at the path
    # When a browser opens it
    response = client.get("/no/such/page", **HTML)

    # Then it is a 404 page that says there is nothing there
    assert response.status_code == 404
    assert b"There is nothing at" in response.content


def test_unknown_path_is_a_json_404_for_api_clients(client: Client) -> None:
    # Given no page at the path
    # When an API client asks for it
    response = client.get("/no/such/thing")

    # Then it is a 404 in JSON with the not_found code
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_notification_times_read_as_words(client: Client, clock) -> None:
    # Given alice's notification, and one three hours later
    make_notification(title="fresh")
    clock.advance(hours=3)
    make_notification(title="newer")

    # When the page is opened
    content = client.get("/notifications", **HTML).content

    # Then the older one reads "3 hours ago" and the newer "just now"
    assert b"3\xc2\xa0hours ago" in content
    assert b"just now" in content


def test_a_notification_link_that_is_not_an_address_is_not_rendered_as_a_link(client: Client) -> None:
    # Given a notification whose link, typed in admin, is a script
    make_notification(link="javascript:alert(1)", title="Odd link")

    # When alice opens her notifications
    response = client.get("/notifications", **HTML)

    # Then the title shows as text, and the script is nowhere in the page
    assert b"Odd link" in response.content
    assert b"javascript:alert" not in response.content


@pytest.mark.parametrize("link", ["/\\evil.example/login", "/\t/evil.example/login", "//evil.example/login"])
def test_a_notification_link_that_a_browser_reads_as_another_site_is_not_a_link(client: Client, link: str) -> None:
    # Given a notification whose link, typed in admin, starts like a site path but a browser reads
    # as another site ("/\" and "/<tab>/" become "//")
    make_notification(link=link, title="Odd link")

    # When alice opens her notifications
    response = client.get("/notifications", **HTML)

    # Then the title shows as text, and the other site is linked nowhere in the page
    assert b"Odd link" in response.content
    assert b"evil.example" not in response.content

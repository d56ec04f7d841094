"""Django admin for notifications: filters, search and the mark-read action."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from collab import clock, demo
from collab.models import Notification
from tests.factories import make_notification

pytestmark = pytest.mark.django_db


def test_admin_filters_notifications_by_kind_and_read(admin_client_logged_in: Client) -> None:
    # Given an unread mention, an unread share and a read mention
    make_notification(kind="mention", title="about the outage")
    make_notification(kind="share", title="chat shared")
    make_notification(kind="mention", title="already seen", read=True)

    # When staff filter the admin list to unread mentions
    response = admin_client_logged_in.get("/admin/collab/notification/?kind__exact=mention&read__exact=0")

    # Then only the unread mention is listed
    assert response.status_code == 200
    assert b"about the outage" in response.content
    assert b"chat shared" not in response.content
    assert b"already seen" not in response.content


def test_admin_searches_by_recipient_and_title(admin_client_logged_in: Client) -> None:
    # Given a notification to carol about a disk report and one to bob about a status flip
    make_notification(recipient="carol", title="disk report")
    make_notification(recipient="bob", title="status flip")

    # When staff search the admin list by a recipient and by a word of a title
    by_recipient = admin_client_logged_in.get("/admin/collab/notification/?q=carol")
    by_title = admin_client_logged_in.get("/admin/collab/notification/?q=flip")

    # Then each search finds its notification only
    assert b"disk report" in by_recipient.content
    assert b"status flip" not in by_recipient.content
    assert b"status flip" in by_title.content


def test_admin_action_marks_selected_notifications_read(admin_client_logged_in: Client) -> None:
    # Given two unread notifications
    chosen = make_notification()
    other = make_notification()

    # When staff run the mark-read action on one of them
    admin_client_logged_in.post("/admin/collab/notification/", {"action": "mark_read", "_selected_action": [chosen.pk]})

    # Then only that one is read, and the staff account is its last editor
    assert Notification.objects.get(pk=chosen.pk).read is True
    assert Notification.objects.get(pk=chosen.pk).updated_by == "root"
    assert Notification.objects.get(pk=other.pk).read is False


def test_api_docs_page_loads_its_assets_locally(client: Client) -> None:
    # Given alice in a browser, with no internet assumed
    # When she opens the API docs page
    response = client.get("/api/docs", HTTP_ACCEPT="text/html")

    # Then it loads, its assets come from the service's own static files and no CDN is named
    assert response.status_code == 200
    assert b"/static/drf_spectacular_sidecar/" in response.content
    assert b"cdn" not in response.content.lower()


def test_openapi_schema_documents_the_pages_shared_api_paths(client: Client) -> None:
    # Given the pages' scripts, which call the identity and notification API
    # When the OpenAPI schema is fetched as JSON
    paths = client.get("/api/schema", HTTP_ACCEPT="application/json").json()["paths"]

    # Then it documents the identity and notification paths the pages call
    assert {
        "/me",
        "/users",
        "/notifications",
        "/notifications/read-all",
        "/notifications/{notification_id}/read",
    } <= set(paths)


def test_the_demos_staff_person_signs_in_to_admin_with_the_demo_password(client: Client) -> None:
    # Given the demo's accounts, alice being the mock directory's staff
    demo.load(say=lambda line: None)

    # When alice signs in at /admin/ with the demo password
    response = client.post("/admin/login/?next=/admin/", {"username": "alice", "password": "demo"}, follow=True)

    # Then she reaches the site administration, with the service's models on it
    assert response.redirect_chain[-1][0] == "/admin/"
    assert b"Site administration" in response.content
    assert b"Notifications" in response.content


def test_loading_the_demo_again_gives_an_existing_staff_account_its_rights(client: Client) -> None:
    # Given alice's demo account from an earlier load, made before she was staff
    demo.load(say=lambda line: None)
    get_user_model().objects.filter(username="alice").update(is_staff=False, is_superuser=False)

    # When the demo is loaded again
    demo.load(say=lambda line: None)

    # Then she is staff again, and bob, who is not staff in the directory, is not
    assert get_user_model().objects.get(username="alice").is_staff
    assert not get_user_model().objects.get(username="bob").is_staff


@pytest.mark.urls("tests.collab.rooted_urls")
@override_settings(WORKSPACE_ROOT_PATH="/ws", STATIC_URL="/ws/static/")
def test_admins_view_site_link_stays_under_the_root_path(admin_client_logged_in: Client) -> None:
    # Given the site under /ws
    # When staff open admin
    response = admin_client_logged_in.get("/ws/admin/")

    # Then "View site" goes to the home page under /ws, not to the host's root
    assert response.status_code == 200
    assert b'<a href="/ws/">View site</a>' in response.content


def test_an_admin_edit_of_a_notification_reaches_the_next_poll(admin_client_logged_in: Client, alice_api) -> None:
    # Given alice's older notification and a newer one, and the ETag of her inbox
    older = make_notification(title="disk at 91%", created_at=clock.now() - timedelta(hours=1))
    make_notification(title="status flip")
    etag = alice_api.get("/notifications").headers["ETag"]

    # When staff correct the older one's title in admin
    form = {"recipient": "alice", "kind": "mention", "title": "disk at 19%", "body": "", "link": "", "actor": "bob"}
    saved = admin_client_logged_in.post(f"/admin/collab/notification/{older.pk}/change/", form)

    # Then her next poll with that ETag gets the inbox again (not a 304), with the new title
    response = alice_api.get("/notifications", HTTP_IF_NONE_MATCH=etag)
    assert saved.status_code == 302
    assert response.status_code == 200
    assert "disk at 19%" in [row["title"] for row in response.json()["results"]]


def test_an_admin_delete_of_a_read_notification_reaches_the_next_poll(
    admin_client_logged_in: Client, alice_api
) -> None:
    # Given alice's older notification, read, and a newer one, and the ETag of her inbox
    older = make_notification(title="sent by mistake", read=True, created_at=clock.now() - timedelta(hours=1))
    make_notification(title="status flip")
    etag = alice_api.get("/notifications").headers["ETag"]

    # When staff delete the older one in admin
    deleted = admin_client_logged_in.post(f"/admin/collab/notification/{older.pk}/delete/", {"post": "yes"})

    # Then her next poll with that ETag gets the inbox again (not a 304), without it
    response = alice_api.get("/notifications", HTTP_IF_NONE_MATCH=etag)
    assert deleted.status_code == 302
    assert response.status_code == 200
    assert [row["title"] for row in response.json()["results"]] == ["status flip"]

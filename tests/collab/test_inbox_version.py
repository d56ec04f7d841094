"""The notification poll's ETag is one row per person (collab.models.InboxVersion): every change to
a person's inbox moves it, nothing else does, and a poll that finds it unchanged costs one query
whoever asks: a mock user, a token's script, a signed-in browser."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client
from rest_framework.test import APIClient

from collab.actor import Actor
from collab.models import Notification
from collab.services import (
    notification_mark_read,
    notifications_mark_all_read,
    notifications_mark_selected_read,
    notify,
)
from tests.factories import make_notification

pytestmark = pytest.mark.django_db


def _send(notification: Notification) -> None:
    with transaction.atomic():
        notify(["alice"], "mention", "Another mention")


def _read_one(notification: Notification) -> None:
    notification_mark_read(notification_id=notification.id, actor=Actor("alice"))


def _read_all(notification: Notification) -> None:
    notifications_mark_all_read(user_id="alice")


def _read_as_staff(notification: Notification) -> None:
    notifications_mark_selected_read(notification_ids=[notification.id], user_id="ops")


def _edit(notification: Notification) -> None:
    notification.title = "Edited in admin"
    notification.save()


def _delete(notification: Notification) -> None:
    notification.delete()


def _delete_by_query(notification: Notification) -> None:
    Notification.objects.filter(recipient="alice").delete()


def _moved_away(notification: Notification) -> None:
    notification.recipient = "bob"
    notification.save()


CHANGES: dict[str, Callable[[Notification], None]] = {
    "a notification arrives": _send,
    "one is marked read": _read_one,
    "all are marked read": _read_all,
    "staff mark it read": _read_as_staff,
    "it is edited": _edit,
    "it is deleted": _delete,
    "the inbox is emptied by a query": _delete_by_query,
    "it is given to someone else": _moved_away,
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_every_change_to_a_persons_inbox_changes_its_etag(
    alice_api: APIClient, django_capture_on_commit_callbacks, change: Callable[[Notification], None]
) -> None:
    # Given alice's unread notification and the ETag of her inbox
    notification = make_notification(recipient="alice")
    etag = alice_api.get("/notifications")["ETag"]
    # When her inbox changes
    with django_capture_on_commit_callbacks(execute=True):
        change(notification)
    # Then her next poll with the old ETag gets the inbox and a new ETag
    response = alice_api.get("/notifications", HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 200
    assert response["ETag"] != etag


def test_someone_elses_notifications_leave_an_inbox_etag_alone(alice_api: APIClient) -> None:
    # Given the ETag of alice's inbox
    make_notification(recipient="alice")
    etag = alice_api.get("/notifications")["ETag"]
    # When bob gets a notification and reads all of his
    make_notification(recipient="bob")
    notifications_mark_all_read(user_id="bob")
    # Then alice's poll still finds nothing new
    assert alice_api.get("/notifications", HTTP_IF_NONE_MATCH=etag).status_code == 304


@pytest.fixture
def django_accounts(settings) -> None:
    settings.WORKSPACE_USER_DIRECTORY = "collab.identity.DjangoUserDirectory"
    settings.WORKSPACE_CURRENT_USER_PROVIDER = "collab.identity.RequestUserProvider"


def test_a_scripts_unchanged_poll_with_a_token_costs_one_query(django_accounts, django_assert_max_num_queries) -> None:
    # Given erin's token, her notification, and the ETag of her inbox
    user = get_user_model().objects.create_user("erin", password="long-enough-pass")
    browser = APIClient()
    browser.force_login(user)
    token = browser.post("/me/tokens", {"name": "poller"}, format="json").json()["token"]
    make_notification(recipient="erin")
    script = APIClient(HTTP_AUTHORIZATION=f"Bearer {token}")
    etag = script.get("/notifications")["ETag"]
    # When the script polls again with that ETag
    with django_assert_max_num_queries(1):
        response = script.get("/notifications", HTTP_IF_NONE_MATCH=etag)
    # Then it is a 304 that read the inbox's version and nothing else
    assert response.status_code == 304


def test_an_empty_inbox_page_still_counts_every_unread_notification(
    alice_api: APIClient, django_assert_max_num_queries
) -> None:
    # Given alice with unread notifications of one kind only
    make_notification(recipient="alice", kind=Notification.Kind.MENTION)
    # When she asks for another kind (an empty page) / Then the count is still right, in three queries
    with django_assert_max_num_queries(3):
        body = alice_api.get("/notifications?kind=share").json()
    assert (body["results"], body["unread_count"]) == ([], 1)


def test_a_signed_in_browsers_poll_still_answers_304(django_accounts) -> None:
    # Given erin signed in, with a notification, and the ETag of her inbox
    user = get_user_model().objects.create_user("erin", password="long-enough-pass")
    browser = Client()
    browser.force_login(user)
    make_notification(recipient="erin")
    etag = browser.get("/notifications", HTTP_ACCEPT="application/json")["ETag"]
    # When the page polls / Then it is a 304
    assert browser.get("/notifications", HTTP_ACCEPT="application/json", HTTP_IF_NONE_MATCH=etag).status_code == 304

"""Notifications: the inbox, its conditional GET, reads, and the notify service."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from rest_framework.test import APIClient

from collab.models import Notification
from collab.services import notify
from tests.factories import make_notification

pytestmark = pytest.mark.django_db


def test_inbox_lists_unread_first_then_newest(alice_api: APIClient, clock) -> None:
    old_unread = make_notification(title="old unread")
    clock.advance(minutes=1)
    newest_read = make_notification(title="newest read", read=True)
    clock.advance(minutes=1)
    new_unread = make_notification(title="new unread")

    results = alice_api.get("/notifications").json()["results"]

    assert [row["id"] for row in results] == [new_unread.id, old_unread.id, newest_read.id]


def test_inbox_shows_only_the_callers_notifications(alice_api: APIClient) -> None:
    make_notification(recipient="bob", title="for bob")
    mine = make_notification(recipient="alice", title="for alice")

    body = alice_api.get("/notifications").json()

    assert [row["id"] for row in body["results"]] == [mine.id]
    assert body["unread_count"] == 1


def test_inbox_rows_carry_the_spec_fields_with_epoch_milliseconds(alice_api: APIClient, clock) -> None:
    notification = make_notification(kind="share", title="Chat shared", body="b", link="/kb/chats/3", actor="bob")

    row = alice_api.get("/notifications").json()["results"][0]

    assert row == {
        "id": notification.id,
        "recipient": "alice",
        "kind": "share",
        "title": "Chat shared",
        "body": "b",
        "link": "/kb/chats/3",
        "actor": "bob",
        "read": False,
        "created_at": int(clock.now().timestamp() * 1000),
    }


def test_inbox_returns_fifty_by_default_and_counts_all_unread(alice_api: APIClient) -> None:
    Notification.objects.bulk_create(Notification(recipient="alice", kind="mention", title=f"n{i}") for i in range(60))

    body = alice_api.get("/notifications").json()

    assert len(body["results"]) == 50
    assert body["unread_count"] == 60


def test_inbox_limit_can_be_raised_to_two_hundred(alice_api: APIClient) -> None:
    Notification.objects.bulk_create(Notification(recipient="alice", kind="mention", title=f"n{i}") for i in range(210))

    assert len(alice_api.get("/notifications?limit=200").json()["results"]) == 200


@pytest.mark.parametrize("limit", ["0", "201", "-3", "ten"])
def test_inbox_limit_out_of_range_is_400(alice_api: APIClient, limit: str) -> None:
    response = alice_api.get(f"/notifications?limit={limit}")

    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert "limit" in response.json()["detail"]


def test_inbox_answers_304_when_nothing_changed(alice_api: APIClient) -> None:
    make_notification()
    etag = alice_api.get("/notifications")["ETag"]

    response = alice_api.get("/notifications", HTTP_IF_NONE_MATCH=etag)

    assert response.status_code == 304
    assert response["ETag"] == etag
    assert not response.content


def test_inbox_etag_changes_when_a_notification_is_read(alice_api: APIClient, clock) -> None:
    notification = make_notification()
    etag = alice_api.get("/notifications")["ETag"]
    alice_api.post(f"/notifications/{notification.id}/read")

    response = alice_api.get("/notifications", HTTP_IF_NONE_MATCH=etag)

    assert response.status_code == 200
    assert response["ETag"] != etag


def test_inbox_etag_changes_when_a_notification_arrives(alice_api: APIClient, clock) -> None:
    etag = alice_api.get("/notifications")["ETag"]
    make_notification()

    assert alice_api.get("/notifications", HTTP_IF_NONE_MATCH=etag).status_code == 200


def test_inbox_etag_differs_per_limit(alice_api: APIClient) -> None:
    make_notification()

    assert alice_api.get("/notifications?limit=5")["ETag"] != alice_api.get("/notifications?limit=6")["ETag"]


def test_inbox_etag_is_per_user(alice_api: APIClient, bob_api: APIClient) -> None:
    etag = alice_api.get("/notifications")["ETag"]

    assert bob_api.get("/notifications", HTTP_IF_NONE_MATCH=etag).status_code == 200


def test_inbox_tells_clients_how_often_to_poll(alice_api: APIClient) -> None:
    assert alice_api.get("/notifications")["X-Poll-Interval"] == "30"


def test_polling_never_marks_anything_read(alice_api: APIClient) -> None:
    make_notification()
    alice_api.get("/notifications")
    alice_api.get("/notifications")

    assert Notification.objects.filter(read=False).count() == 1


def test_inbox_of_two_hundred_rows_costs_two_queries(alice_api: APIClient, django_assert_max_num_queries) -> None:
    Notification.objects.bulk_create(Notification(recipient="alice", kind="mention", title=f"n{i}") for i in range(250))

    with django_assert_max_num_queries(2):
        response = alice_api.get("/notifications?limit=200")

    assert len(response.json()["results"]) == 200


def test_unchanged_poll_costs_one_query(alice_api: APIClient, django_assert_num_queries) -> None:
    make_notification()
    etag = alice_api.get("/notifications")["ETag"]

    with django_assert_num_queries(1):
        assert alice_api.get("/notifications", HTTP_IF_NONE_MATCH=etag).status_code == 304


def test_mark_read_marks_one_notification_and_records_who(alice_api: APIClient, clock) -> None:
    notification = make_notification()
    clock.advance(seconds=5)

    response = alice_api.post(f"/notifications/{notification.id}/read")

    notification.refresh_from_db()
    assert response.status_code == 200
    assert response.json()["read"] is True
    assert response.json()["id"] == notification.id
    assert notification.read is True
    assert notification.updated_by == "alice"
    assert notification.updated_at == clock.now()


def test_mark_read_twice_is_harmless(alice_api: APIClient) -> None:
    notification = make_notification()
    alice_api.post(f"/notifications/{notification.id}/read")

    response = alice_api.post(f"/notifications/{notification.id}/read")

    assert response.status_code == 200
    assert response.json()["read"] is True


def test_mark_read_of_someone_elses_notification_is_404(bob_api: APIClient) -> None:
    notification = make_notification(recipient="alice")

    response = bob_api.post(f"/notifications/{notification.id}/read")

    notification.refresh_from_db()
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert notification.read is False


def test_mark_read_of_a_missing_notification_is_404(alice_api: APIClient) -> None:
    assert alice_api.post("/notifications/999999/read").status_code == 404


def test_read_all_marks_only_the_callers_unread_notifications(alice_api: APIClient) -> None:
    make_notification(recipient="alice")
    make_notification(recipient="alice")
    make_notification(recipient="alice", read=True)
    make_notification(recipient="bob")

    response = alice_api.post("/notifications/read-all")

    assert response.json() == {"marked": 2}
    assert alice_api.get("/notifications").json()["unread_count"] == 0
    assert Notification.objects.get(recipient="bob").read is False


def test_malformed_json_body_is_400_with_error_and_detail(alice_api: APIClient) -> None:
    make_notification()

    response = alice_api.post("/notifications/read-all", data="{not json", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["error"] == "malformed_request"
    assert "JSON" in response.json()["detail"]
    assert Notification.objects.filter(read=False).count() == 1


def test_get_on_read_all_is_not_allowed(alice_api: APIClient) -> None:
    response = alice_api.get("/notifications/read-all")

    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"


def test_notify_inserts_one_row_per_distinct_recipient_on_commit(
    django_capture_on_commit_callbacks, django_assert_num_queries
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        sent_to = notify(["bob", "carol", "bob", ""], "mention", "You were mentioned", link="/investigations/4")
    assert Notification.objects.count() == 0

    with django_assert_num_queries(1):
        for callback in callbacks:
            callback()

    assert sent_to == ["bob", "carol"]
    assert sorted(Notification.objects.values_list("recipient", flat=True)) == ["bob", "carol"]


def test_notify_sends_nothing_when_the_transaction_rolls_back(django_capture_on_commit_callbacks) -> None:
    class Abort(Exception):
        pass

    def share_then_fail() -> None:
        with transaction.atomic():
            notify(["bob"], "share", "Shared with you")
            raise Abort

    with django_capture_on_commit_callbacks(execute=True), pytest.raises(Abort):
        share_then_fail()

    assert Notification.objects.count() == 0


def test_notify_refuses_an_unknown_kind(django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(ValueError, match="Unknown notification kind"):
        notify(["bob"], "party", "Cake")

    assert Notification.objects.count() == 0


@pytest.mark.parametrize("kind", ["assignment", "agent_done", "system"])
def test_notify_accepts_the_reserved_kinds(django_capture_on_commit_callbacks, kind: str) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        notify(["bob"], kind, "Reserved")

    assert Notification.objects.get().kind == kind


def test_notify_by_the_agent_has_no_actor(django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        notify(["bob"], "mention", "The agent mentioned you", actor=None)

    assert Notification.objects.get().actor is None


def test_model_validation_refuses_an_unknown_kind() -> None:
    notification = Notification(recipient="bob", kind="party", title="Cake")

    with pytest.raises(ValidationError, match="kind"):
        notification.full_clean()

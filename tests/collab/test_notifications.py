"""Notifications: the inbox, its conditional GET, reads, and the notify service."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from collab.models import Notification
from collab.services import notify
from tests.factories import make_notification

pytestmark = pytest.mark.django_db


def test_inbox_lists_unread_first_then_newest(alice_api: APIClient, clock) -> None:
    # Given alice's old unread, newer read and newest unread notifications, a minute apart
    old_unread = make_notification(title="old unread")
    clock.advance(minutes=1)
    newest_read = make_notification(title="newest read", read=True)
    clock.advance(minutes=1)
    new_unread = make_notification(title="new unread")

    # When she opens her inbox
    results = alice_api.get("/notifications").json()["results"]

    # Then the unread come first, newest first, and the read one after them
    assert [row["id"] for row in results] == [new_unread.id, old_unread.id, newest_read.id]


def test_inbox_shows_only_the_callers_notifications(alice_api: APIClient) -> None:
    # Given a notification for bob and one for alice
    make_notification(recipient="bob", title="for bob")
    mine = make_notification(recipient="alice", title="for alice")

    # When alice opens her inbox
    body = alice_api.get("/notifications").json()

    # Then she sees hers only and counts hers only as unread
    assert [row["id"] for row in body["results"]] == [mine.id]
    assert body["unread_count"] == 1


def test_inbox_rows_carry_the_spec_fields_with_epoch_milliseconds(alice_api: APIClient, clock) -> None:
    # Given a share notification for alice from bob, made now
    notification = make_notification(kind="share", title="Chat shared", body="b", link="/kb/chats/3", actor="bob")

    # When she opens her inbox
    row = alice_api.get("/notifications").json()["results"][0]

    # Then its row holds the spec's fields, created_at in epoch milliseconds
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
    # Given sixty unread notifications for alice
    Notification.objects.bulk_create(Notification(recipient="alice", kind="mention", title=f"n{i}") for i in range(60))

    # When she opens her inbox without a limit
    body = alice_api.get("/notifications").json()

    # Then fifty come back and the unread count is all sixty
    assert len(body["results"]) == 50
    assert body["unread_count"] == 60


def test_inbox_limit_can_be_raised_to_two_hundred(alice_api: APIClient) -> None:
    # Given 210 notifications for alice
    Notification.objects.bulk_create(Notification(recipient="alice", kind="mention", title=f"n{i}") for i in range(210))

    # When she asks for a limit of 200 / Then 200 come back
    assert len(alice_api.get("/notifications?limit=200").json()["results"]) == 200


@pytest.mark.parametrize("limit", ["0", "201", "-3", "ten"])
def test_inbox_limit_out_of_range_is_400(alice_api: APIClient, limit: str) -> None:
    # Given alice, whose inbox takes a limit of 1 to 200
    # When she asks her inbox for a limit of zero, past 200, negative or not a number
    response = alice_api.get(f"/notifications?limit={limit}")

    # Then it is 400 naming the limit
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert "limit" in response.json()["detail"]


def test_inbox_answers_304_when_nothing_changed(alice_api: APIClient) -> None:
    # Given alice's notification and the ETag of her inbox
    make_notification()
    etag = alice_api.get("/notifications")["ETag"]

    # When she polls again with that ETag
    response = alice_api.get("/notifications", HTTP_IF_NONE_MATCH=etag)

    # Then it is 304 with the same ETag and no body
    assert response.status_code == 304
    assert response["ETag"] == etag
    assert not response.content


def test_inbox_etag_changes_when_a_notification_is_read(alice_api: APIClient, clock) -> None:
    # Given alice's notification and the ETag of her inbox
    notification = make_notification()
    etag = alice_api.get("/notifications")["ETag"]
    # When she marks it read and polls again with the old ETag
    alice_api.post(f"/notifications/{notification.id}/read")

    response = alice_api.get("/notifications", HTTP_IF_NONE_MATCH=etag)

    # Then the inbox comes back with a new ETag
    assert response.status_code == 200
    assert response["ETag"] != etag


def test_inbox_etag_changes_when_a_notification_arrives(alice_api: APIClient, clock) -> None:
    # Given the ETag of alice's empty inbox
    etag = alice_api.get("/notifications")["ETag"]
    # When a notification arrives
    make_notification()

    # Then polling with the old ETag returns the inbox again
    assert alice_api.get("/notifications", HTTP_IF_NONE_MATCH=etag).status_code == 200


def test_inbox_etag_differs_per_limit(alice_api: APIClient) -> None:
    # Given alice's notification
    make_notification()

    # When her inbox is fetched with a limit of 5 and of 6 / Then the two ETags differ
    assert alice_api.get("/notifications?limit=5")["ETag"] != alice_api.get("/notifications?limit=6")["ETag"]


def test_inbox_etag_is_per_user(alice_api: APIClient, bob_api: APIClient) -> None:
    # Given the ETag of alice's inbox
    etag = alice_api.get("/notifications")["ETag"]

    # When bob polls his inbox with it / Then he gets his inbox, not a 304
    assert bob_api.get("/notifications", HTTP_IF_NONE_MATCH=etag).status_code == 200


def test_inbox_tells_clients_how_often_to_poll(alice_api: APIClient) -> None:
    # Given alice, whose pages poll her inbox
    # When she opens her inbox / Then it tells her to poll every thirty seconds
    assert alice_api.get("/notifications")["X-Poll-Interval"] == "30"


def test_polling_never_marks_anything_read(alice_api: APIClient) -> None:
    # Given alice's unread notification
    make_notification()
    # When she polls her inbox twice
    alice_api.get("/notifications")
    alice_api.get("/notifications")

    # Then it stays unread
    assert Notification.objects.filter(read=False).count() == 1


def test_inbox_of_two_hundred_rows_costs_two_queries(alice_api: APIClient, django_assert_max_num_queries) -> None:
    # Given 250 notifications for alice
    Notification.objects.bulk_create(Notification(recipient="alice", kind="mention", title=f"n{i}") for i in range(250))

    # When she asks for 200 of them
    with django_assert_max_num_queries(2):
        response = alice_api.get("/notifications?limit=200")

    # Then they come back in at most two queries
    assert len(response.json()["results"]) == 200


def test_unchanged_poll_costs_one_query(alice_api: APIClient, django_assert_num_queries) -> None:
    # Given alice's notification and the ETag of her inbox
    make_notification()
    etag = alice_api.get("/notifications")["ETag"]

    # When she polls with that ETag / Then the 304 costs one query
    with django_assert_num_queries(1):
        assert alice_api.get("/notifications", HTTP_IF_NONE_MATCH=etag).status_code == 304


def test_mark_read_marks_one_notification_and_records_who(alice_api: APIClient, clock) -> None:
    # Given alice's unread notification, and five seconds later
    notification = make_notification()
    clock.advance(seconds=5)

    # When she marks it read
    response = alice_api.post(f"/notifications/{notification.id}/read")

    # Then it comes back read, and the row records alice and the time as its last edit
    notification.refresh_from_db()
    assert response.status_code == 200
    assert response.json()["read"] is True
    assert response.json()["id"] == notification.id
    assert notification.read is True
    assert notification.updated_by == "alice"
    assert notification.updated_at == clock.now()


def test_mark_read_twice_is_harmless(alice_api: APIClient) -> None:
    # Given alice's notification, already marked read
    notification = make_notification()
    alice_api.post(f"/notifications/{notification.id}/read")

    # When she marks it read again
    response = alice_api.post(f"/notifications/{notification.id}/read")

    # Then it is 200 and it stays read
    assert response.status_code == 200
    assert response.json()["read"] is True


def test_mark_read_of_someone_elses_notification_is_404(bob_api: APIClient) -> None:
    # Given alice's unread notification
    notification = make_notification(recipient="alice")

    # When bob marks it read
    response = bob_api.post(f"/notifications/{notification.id}/read")

    # Then it is 404 not_found and it stays unread
    notification.refresh_from_db()
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert notification.read is False


def test_mark_read_of_a_missing_notification_is_404(alice_api: APIClient) -> None:
    # Given no such notification
    # When alice marks it read / Then it is 404
    assert alice_api.post("/notifications/999999/read").status_code == 404


def test_read_all_marks_only_the_callers_unread_notifications(alice_api: APIClient) -> None:
    # Given two unread and one read notification for alice, and one unread for bob
    make_notification(recipient="alice")
    make_notification(recipient="alice")
    make_notification(recipient="alice", read=True)
    make_notification(recipient="bob")

    # When alice marks all read
    response = alice_api.post("/notifications/read-all")

    # Then her two unread ones are marked and bob's stays unread
    assert response.json() == {"marked": 2}
    assert alice_api.get("/notifications").json()["unread_count"] == 0
    assert Notification.objects.get(recipient="bob").read is False


def test_malformed_json_body_is_400_with_error_and_detail(alice_api: APIClient) -> None:
    # Given alice's unread notification
    make_notification()

    # When she posts broken JSON to read-all
    response = alice_api.post("/notifications/read-all", data="{not json", content_type="application/json")

    # Then it is 400 malformed_request naming JSON, and nothing is marked read
    assert response.status_code == 400
    assert response.json()["error"] == "malformed_request"
    assert "JSON" in response.json()["detail"]
    assert Notification.objects.filter(read=False).count() == 1


def test_get_on_read_all_is_not_allowed(alice_api: APIClient) -> None:
    # Given alice, for whom read-all is a write
    # When she GETs read-all
    response = alice_api.get("/notifications/read-all")

    # Then it is 405 method_not_allowed
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"


def test_notify_inserts_one_row_per_distinct_recipient_on_commit(django_capture_on_commit_callbacks) -> None:
    # Given a mention sent, inside a transaction, to bob, carol, bob again and an empty recipient
    with django_capture_on_commit_callbacks() as callbacks:
        sent_to = notify(["bob", "carol", "bob", ""], "mention", "You were mentioned", link="/investigations/4")
    # Then nothing is stored until the transaction commits
    assert Notification.objects.count() == 0

    # When it commits
    with CaptureQueriesContext(connection) as queries:
        for callback in callbacks:
            callback()

    # Then bob and carol each get one row, inserted in one query beside the one that moves their
    # inboxes' versions (the rest is the transaction around the two)
    inserts = [q["sql"].split("(", 1)[0] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 2
    assert any("collab_notification" in i for i in inserts)
    assert sent_to == ["bob", "carol"]
    assert sorted(Notification.objects.values_list("recipient", flat=True)) == ["bob", "carol"]


def test_notify_sends_nothing_when_the_transaction_rolls_back(django_capture_on_commit_callbacks) -> None:
    # Given a share notification sent inside a transaction that then fails
    class Abort(Exception):
        pass

    def share_then_fail() -> None:
        with transaction.atomic():
            notify(["bob"], "share", "Shared with you")
            raise Abort

    # When it runs
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(Abort):
        share_then_fail()

    # Then nobody is notified
    assert Notification.objects.count() == 0


def test_notify_refuses_an_unknown_kind(django_capture_on_commit_callbacks) -> None:
    # Given a kind that notifications do not know
    # When it is sent / Then it is refused
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(ValueError, match="Unknown notification kind"):
        notify(["bob"], "party", "Cake")

    # Then nothing is stored either
    assert Notification.objects.count() == 0


@pytest.mark.parametrize("kind", ["assignment", "agent_done", "system"])
def test_notify_accepts_the_reserved_kinds(django_capture_on_commit_callbacks, kind: str) -> None:
    # Given a kind the spec reserves for later use
    # When it is sent
    with django_capture_on_commit_callbacks(execute=True):
        notify(["bob"], kind, "Reserved")

    # Then it is stored with that kind
    assert Notification.objects.get().kind == kind


def test_notify_by_the_agent_has_no_actor(django_capture_on_commit_callbacks) -> None:
    # Given a mention sent by the agent, not a person
    # When it is sent
    with django_capture_on_commit_callbacks(execute=True):
        notify(["bob"], "mention", "The agent mentioned you", actor=None)

    # Then its notification names no actor
    assert Notification.objects.get().actor is None


def test_model_validation_refuses_an_unknown_kind() -> None:
    # Given a notification of an unknown kind
    notification = Notification(recipient="bob", kind="party", title="Cake")

    # When the model validates it / Then it is refused, naming the kind
    with pytest.raises(ValidationError, match="kind"):
        notification.full_clean()

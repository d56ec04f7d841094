"""Read-only sharing of KB chats: owner-only changes, unknown ids, notifications to new readers only."""

from __future__ import annotations

import pytest

from collab.models import Notification
from knowledge.models import KbChatMessage, KbChatShare

pytestmark = pytest.mark.django_db


@pytest.fixture
def share(django_capture_on_commit_callbacks, api_client_for):
    def send(chat_id, payload, *, user_id="alice"):
        with django_capture_on_commit_callbacks(execute=True):
            return api_client_for(user_id).post(f"/kb/chats/{chat_id}/share", payload, format="json")

    return send


def test_owner_shares_and_each_new_reader_gets_one_share_notification(handbook, make_chat, share):
    chat = make_chat(handbook, title="Quota help")

    response = share(chat.id, {"user_ids": ["bob", "carol"]})

    assert response.status_code == 200
    assert response.json() == {"shared_with": ["bob", "carol"]}
    notes = list(Notification.objects.order_by("recipient").values_list("recipient", "kind", "link", "actor"))
    assert notes == [
        ("bob", "share", f"/kb/chats/{chat.id}", "alice"),
        ("carol", "share", f"/kb/chats/{chat.id}", "alice"),
    ]


def test_sharing_again_with_an_existing_reader_sends_no_second_notification(handbook, make_chat, share):
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob"]})

    response = share(chat.id, {"user_ids": ["bob", "carol"]})

    assert response.json() == {"shared_with": ["bob", "carol"]}
    assert sorted(Notification.objects.values_list("recipient", flat=True)) == ["bob", "carol"]


def test_sharing_with_the_owner_is_accepted_without_a_notification(handbook, make_chat, share):
    chat = make_chat(handbook)

    response = share(chat.id, {"user_ids": ["alice"]})

    assert response.status_code == 200
    assert response.json() == {"shared_with": []}
    assert not Notification.objects.exists()


def test_unknown_user_ids_are_refused_by_name_and_nothing_changes(handbook, make_chat, share):
    chat = make_chat(handbook)

    response = share(chat.id, {"user_ids": ["bob", "mallory", "eve"]})

    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "unknown_users"
    assert body["user_ids"] == ["mallory", "eve"]
    assert "mallory" in body["detail"]
    assert "eve" in body["detail"]
    assert not KbChatShare.objects.exists()
    assert not Notification.objects.exists()


@pytest.mark.parametrize("payload", [{"user_ids": "bob"}, {"user_ids": {"bob": True}}, ["bob"], {}])
def test_share_payload_that_is_not_a_list_of_ids_is_refused(handbook, make_chat, share, payload):
    chat = make_chat(handbook)

    response = share(chat.id, payload)

    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert not KbChatShare.objects.exists()


def test_shared_reader_cannot_share(handbook, make_chat, share):
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob"]})

    response = share(chat.id, {"user_ids": ["carol"]}, user_id="bob")

    assert response.status_code == 403
    assert response.json()["error"] == "read_only_share"
    assert list(KbChatShare.objects.values_list("user_id", flat=True)) == ["bob"]


def test_stranger_cannot_share_and_learns_nothing(handbook, make_chat, share):
    chat = make_chat(handbook)

    response = share(chat.id, {"user_ids": ["carol"]}, user_id="dave")

    assert response.status_code == 404
    assert not KbChatShare.objects.exists()


def test_shared_reader_can_read_the_whole_chat(handbook, make_chat, share, ask, bob_api):
    chat = make_chat(handbook)
    ask(chat.id, "quota")
    share(chat.id, {"user_ids": ["bob"]})

    body = bob_api.get(f"/kb/chats/{chat.id}").json()

    assert body["shared_with"] == ["bob"]
    assert [message["role"] for message in body["messages"]] == ["user", "assistant"]
    assert [chat_row["id"] for chat_row in bob_api.get("/kb/chats").json()] == [chat.id]


def test_shared_reader_cannot_send_message(handbook, make_chat, share, ask):
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob"]})

    response = ask(chat.id, "quota", user_id="bob")

    assert response.status_code == 403
    assert response.json()["error"] == "read_only_share"
    assert not KbChatMessage.objects.exists()


def test_owner_unshares_with_204_and_the_reader_loses_access(handbook, make_chat, share, alice_api, bob_api):
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob"]})

    response = alice_api.delete(f"/kb/chats/{chat.id}/share/bob")

    assert response.status_code == 204
    assert not KbChatShare.objects.exists()
    assert bob_api.get(f"/kb/chats/{chat.id}").status_code == 404
    assert bob_api.get("/kb/chats").json() == []


def test_unsharing_someone_who_is_not_a_reader_is_a_no_op(handbook, make_chat, alice_api):
    chat = make_chat(handbook)

    assert alice_api.delete(f"/kb/chats/{chat.id}/share/carol").status_code == 204


def test_shared_reader_cannot_unshare(handbook, make_chat, share, bob_api):
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob", "carol"]})

    response = bob_api.delete(f"/kb/chats/{chat.id}/share/carol")

    assert response.status_code == 403
    assert response.json()["error"] == "read_only_share"
    assert KbChatShare.objects.count() == 2


def test_stranger_cannot_unshare(handbook, make_chat, share, api_client_for):
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob"]})

    response = api_client_for("dave").delete(f"/kb/chats/{chat.id}/share/bob")

    assert response.status_code == 404
    assert KbChatShare.objects.count() == 1


def test_resharing_after_unsharing_notifies_again(handbook, make_chat, share, alice_api):
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob"]})
    alice_api.delete(f"/kb/chats/{chat.id}/share/bob")

    share(chat.id, {"user_ids": ["bob"]})

    assert Notification.objects.filter(recipient="bob", kind="share").count() == 2

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
    # Given alice's chat Quota help
    chat = make_chat(handbook, title="Quota help")

    # When she shares it with bob and carol
    response = share(chat.id, {"user_ids": ["bob", "carol"]})

    # Then both are readers, and each gets one share notification from alice linking to the chat
    assert response.status_code == 200
    assert response.json() == {"shared_with": ["bob", "carol"]}
    notes = list(Notification.objects.order_by("recipient").values_list("recipient", "kind", "link", "actor"))
    assert notes == [
        ("bob", "share", f"/kb/chats/{chat.id}", "alice"),
        ("carol", "share", f"/kb/chats/{chat.id}", "alice"),
    ]


def test_sharing_again_with_an_existing_reader_sends_no_second_notification(handbook, make_chat, share):
    # Given alice's chat shared with bob
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob"]})

    # When she shares it with bob and carol
    response = share(chat.id, {"user_ids": ["bob", "carol"]})

    # Then both are readers, and only carol got a new notification
    assert response.json() == {"shared_with": ["bob", "carol"]}
    assert sorted(Notification.objects.values_list("recipient", flat=True)) == ["bob", "carol"]


def test_sharing_with_the_owner_is_accepted_without_a_notification(handbook, make_chat, share):
    # Given alice's chat
    chat = make_chat(handbook)

    # When she shares it with herself
    response = share(chat.id, {"user_ids": ["alice"]})

    # Then it is accepted, nobody is added as reader and nobody is notified
    assert response.status_code == 200
    assert response.json() == {"shared_with": []}
    assert not Notification.objects.exists()


def test_unknown_user_ids_are_refused_by_name_and_nothing_changes(handbook, make_chat, share):
    # Given alice's chat
    chat = make_chat(handbook)

    # When she shares it with bob and two ids not in the directory
    response = share(chat.id, {"user_ids": ["bob", "mallory", "eve"]})

    # Then it is 400 unknown_users naming both, and nobody is added or notified, bob included
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
    # Given alice's chat
    chat = make_chat(handbook)

    # When she shares it with user_ids that are no list, or with a body that is no object
    response = share(chat.id, payload)

    # Then it is 400 validation_error and nobody is added
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert not KbChatShare.objects.exists()


def test_sharing_with_more_than_200_ids_at_once_is_refused_before_any_lookup(handbook, make_chat, share):
    # Given alice's chat
    chat = make_chat(handbook)

    # When she shares it with 100,000 ids in one request (each a directory lookup, a query each
    # with Django users), then with bob 201 times
    many = share(chat.id, {"user_ids": [f"user{number}" for number in range(100_000)]})
    repeated = share(chat.id, {"user_ids": ["bob"] * 201})

    # Then both are 400 validation_error saying the bound, and nobody is added or told
    assert [(r.status_code, r.json()["error"]) for r in (many, repeated)] == [(400, "validation_error")] * 2
    assert "200" in repeated.json()["detail"]
    assert not KbChatShare.objects.exists()
    assert not Notification.objects.exists()


def test_shared_reader_cannot_share(handbook, make_chat, share):
    # Given alice's chat shared with bob
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob"]})

    # When bob shares it with carol
    response = share(chat.id, {"user_ids": ["carol"]}, user_id="bob")

    # Then it is 403 read_only_share and bob stays the one reader
    assert response.status_code == 403
    assert response.json()["error"] == "read_only_share"
    assert list(KbChatShare.objects.values_list("user_id", flat=True)) == ["bob"]


def test_stranger_cannot_share_and_learns_nothing(handbook, make_chat, share):
    # Given alice's chat
    chat = make_chat(handbook)

    # When dave, a stranger, shares it with carol
    response = share(chat.id, {"user_ids": ["carol"]}, user_id="dave")

    # Then it is 404, as if it did not exist, and nobody is added
    assert response.status_code == 404
    assert not KbChatShare.objects.exists()


def test_shared_reader_can_read_the_whole_chat(handbook, make_chat, share, ask, bob_api):
    # Given alice's chat with one answered question, shared with bob
    chat = make_chat(handbook)
    ask(chat.id, "quota")
    share(chat.id, {"user_ids": ["bob"]})

    # When bob opens it
    body = bob_api.get(f"/kb/chats/{chat.id}").json()

    # Then he reads both messages, and the chat is in his list
    assert body["shared_with"] == ["bob"]
    assert [message["role"] for message in body["messages"]] == ["user", "assistant"]
    assert [chat_row["id"] for chat_row in bob_api.get("/kb/chats").json()] == [chat.id]


def test_shared_reader_cannot_send_message(handbook, make_chat, share, ask):
    # Given alice's chat shared with bob
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob"]})

    # When bob sends a question into it
    response = ask(chat.id, "quota", user_id="bob")

    # Then it is 403 read_only_share and no message is stored
    assert response.status_code == 403
    assert response.json()["error"] == "read_only_share"
    assert not KbChatMessage.objects.exists()


def test_owner_unshares_with_204_and_the_reader_loses_access(handbook, make_chat, share, alice_api, bob_api):
    # Given alice's chat shared with bob
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob"]})

    # When she removes bob
    response = alice_api.delete(f"/kb/chats/{chat.id}/share/bob")

    # Then it is 204, he is no reader, and he can neither open nor list the chat
    assert response.status_code == 204
    assert not KbChatShare.objects.exists()
    assert bob_api.get(f"/kb/chats/{chat.id}").status_code == 404
    assert bob_api.get("/kb/chats").json() == []


def test_unsharing_someone_who_is_not_a_reader_is_a_no_op(handbook, make_chat, alice_api):
    # Given alice's chat shared with nobody
    chat = make_chat(handbook)

    # When she removes carol / Then it is 204 all the same
    assert alice_api.delete(f"/kb/chats/{chat.id}/share/carol").status_code == 204


def test_shared_reader_cannot_unshare(handbook, make_chat, share, bob_api):
    # Given alice's chat shared with bob and carol
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob", "carol"]})

    # When bob removes carol
    response = bob_api.delete(f"/kb/chats/{chat.id}/share/carol")

    # Then it is 403 read_only_share and both stay readers
    assert response.status_code == 403
    assert response.json()["error"] == "read_only_share"
    assert KbChatShare.objects.count() == 2


def test_stranger_cannot_unshare(handbook, make_chat, share, api_client_for):
    # Given alice's chat shared with bob
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob"]})

    # When dave, a stranger, removes bob
    response = api_client_for("dave").delete(f"/kb/chats/{chat.id}/share/bob")

    # Then it is 404 and bob stays a reader
    assert response.status_code == 404
    assert KbChatShare.objects.count() == 1


def test_resharing_after_unsharing_notifies_again(handbook, make_chat, share, alice_api):
    # Given alice's chat shared with bob, then unshared
    chat = make_chat(handbook)
    share(chat.id, {"user_ids": ["bob"]})
    alice_api.delete(f"/kb/chats/{chat.id}/share/bob")

    # When she shares it with bob again
    share(chat.id, {"user_ids": ["bob"]})

    # Then bob has had two share notifications
    assert Notification.objects.filter(recipient="bob", kind="share").count() == 2

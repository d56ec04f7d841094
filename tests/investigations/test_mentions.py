"""Mentions: one `mention` message, one notification per other user, no agent, and no membership:
a mention notifies, only the owner adds members (issue 25.7)."""

from __future__ import annotations

import pytest

from collab.models import Notification
from workspace.agent.models import ItemMessage
from workspace.investigations.models import InvestigationMember

pytestmark = pytest.mark.django_db


def _mention(api, investigation, body, capture):
    with capture(execute=True):
        return api.post(f"/investigations/{investigation.pk}/mentions", body, format="json")


def test_a_mention_appends_a_mention_message_and_notifies_each_user(
    alice_api, make_investigation, django_capture_on_commit_callbacks
):
    # Given alice's investigation Disk alerts
    investigation = make_investigation(title="Disk alerts")
    # When she mentions bob and carol with a note
    response = _mention(alice_api, investigation, {"user_ids": ["bob", "carol"], "note": "look at node 4"},
                        django_capture_on_commit_callbacks)  # fmt: skip
    # Then one mention message holds the note and both names, and each gets a mention from alice linking to it
    assert response.status_code == 201
    body = response.json()
    assert (body["role"], body["content"], body["mentions"]) == ("mention", "look at node 4", ["bob", "carol"])
    sent = Notification.objects.order_by("recipient").values_list("recipient", "kind", "actor", "link", "body")
    link = f"/investigations/{investigation.pk}"
    assert list(sent) == [
        ("bob", "mention", "alice", link, "look at node 4"), ("carol", "mention", "alice", link, "look at node 4"),
    ]  # fmt: skip


def test_a_mention_of_more_than_200_people_at_once_is_400_and_nobody_is_told(
    bob_api, make_investigation, django_capture_on_commit_callbacks
):
    # Given alice's investigation with bob as a member
    investigation = make_investigation(members=["bob"])
    # When bob mentions carol named 201 times
    response = _mention(bob_api, investigation, {"user_ids": ["carol"] * 201}, django_capture_on_commit_callbacks)
    # Then it is a 400 saying the bound, with no mention message and no notification
    assert (response.status_code, response.json()["error"]) == (400, "validation_error")
    assert "200" in response.json()["detail"]
    assert not ItemMessage.objects.filter(role="mention").exists()
    assert not Notification.objects.exists()


def test_the_caller_is_never_notified_of_their_own_mention(
    bob_api, make_investigation, django_capture_on_commit_callbacks
):
    investigation = make_investigation(owner="alice", members=("bob",))
    # Given alice's investigation with bob as member
    # When bob mentions himself and alice
    _mention(bob_api, investigation, {"user_ids": ["bob", "alice"]}, django_capture_on_commit_callbacks)
    # Then only alice is notified
    assert list(Notification.objects.values_list("recipient", flat=True)) == ["alice"]


def test_a_member_cannot_bring_someone_in_by_mentioning_them(
    bob_api, api_client_for, make_investigation, django_capture_on_commit_callbacks
):
    # Given alice's investigation with bob as member
    investigation = make_investigation(owner="alice", members=("bob",))
    # When bob mentions dave in it
    response = _mention(bob_api, investigation, {"user_ids": ["dave"]}, django_capture_on_commit_callbacks)
    # Then dave is notified with the link, yet is no member: the investigation, its item and its exec are 404 to him
    assert response.status_code == 201
    assert Notification.objects.filter(recipient="dave", link=f"/investigations/{investigation.pk}").exists()
    dave = api_client_for("dave")
    assert dave.get(f"/investigations/{investigation.pk}").status_code == 404
    assert dave.get(f"/a/rca/items/{investigation.pk}").status_code == 404
    exec_response = dave.post(f"/a/rca/items/{investigation.pk}/exec", {"command": "id"}, format="json")
    assert exec_response.status_code == 404
    assert list(InvestigationMember.objects.values_list("user_id", flat=True)) == ["bob"]


def test_not_even_the_owners_mention_makes_a_member(
    alice_api, carol_api, make_investigation, django_capture_on_commit_callbacks
):
    # Given alice's investigation
    investigation = make_investigation()
    # When she mentions carol
    _mention(alice_api, investigation, {"user_ids": ["carol"]}, django_capture_on_commit_callbacks)
    # Then carol is notified but cannot open it: members are added as such, by the owner
    assert Notification.objects.filter(recipient="carol").exists()
    assert carol_api.get(f"/investigations/{investigation.pk}").status_code == 404
    assert not InvestigationMember.objects.exists()


def test_unknown_ids_are_named_and_nothing_is_stored_nor_sent(
    alice_api, make_investigation, django_capture_on_commit_callbacks
):
    # Given alice's investigation
    investigation = make_investigation()
    # When she mentions bob and two ids not in the directory
    response = _mention(
        alice_api, investigation, {"user_ids": ["bob", "zed", "yan"]}, django_capture_on_commit_callbacks
    )
    # Then it is 400 naming the unknown ids, and no message, notification or member is stored
    assert response.status_code == 400
    assert response.json()["user_ids"] == ["zed", "yan"]
    assert "zed, yan" in response.json()["detail"]
    assert not ItemMessage.objects.exists()
    assert not Notification.objects.exists()
    assert not InvestigationMember.objects.exists()


@pytest.mark.parametrize("user_ids", ["bob", {"id": "bob"}, None, [], [""]])
def test_user_ids_must_be_a_non_empty_list_of_ids(alice_api, make_investigation, user_ids):
    # Given alice's investigation
    investigation = make_investigation()
    # When she mentions with user_ids that is no list, empty, or holds an empty id
    response = alice_api.post(f"/investigations/{investigation.pk}/mentions", {"user_ids": user_ids}, format="json")
    # Then it is 400 and no message is stored
    assert response.status_code == 400
    assert not ItemMessage.objects.exists()


def test_someone_who_is_neither_owner_nor_member_gets_404(carol_api, make_investigation):
    # Given alice's investigation with bob as member
    investigation = make_investigation(owner="alice", members=("bob",))
    # When carol mentions bob in it
    response = carol_api.post(f"/investigations/{investigation.pk}/mentions", {"user_ids": ["bob"]}, format="json")
    # Then it is 404 and no message is stored
    assert response.status_code == 404
    assert not ItemMessage.objects.exists()


def test_a_mention_never_runs_the_agent(alice_api, make_investigation, settings, django_capture_on_commit_callbacks):
    # Given an agent setting that would fail any turn, and alice's investigation
    settings.WORKSPACE_AGENT = "tests.agent.test_chat_send.BrokenAgent"
    investigation = make_investigation()
    # When she mentions bob with a note that reads like a command and a question
    _mention(
        alice_api, investigation, {"user_ids": ["bob"], "note": "$ rm -rf / ?"}, django_capture_on_commit_callbacks
    )
    # Then the one message stored is the mention: no agent turn ran
    assert list(ItemMessage.objects.values_list("role", flat=True)) == ["mention"]


def test_mentioning_into_a_closed_investigation_is_allowed_and_recorded(
    alice_api, make_investigation, django_capture_on_commit_callbacks
):
    # Given alice's investigation, closed
    investigation = make_investigation()
    alice_api.post(f"/investigations/{investigation.pk}/status", {"status": "closed"}, format="json")
    # When she mentions bob in it
    response = _mention(alice_api, investigation, {"user_ids": ["bob"]}, django_capture_on_commit_callbacks)
    # Then the mention is accepted, stored and sent to bob
    assert response.status_code == 201
    assert ItemMessage.objects.filter(role="mention", mentions=["bob"]).exists()
    assert Notification.objects.filter(recipient="bob", kind="mention").exists()


def test_a_mention_without_a_note_names_the_users(alice_api, make_investigation, django_capture_on_commit_callbacks):
    # Given alice's investigation
    # When she mentions bob with no note
    body = _mention(alice_api, make_investigation(), {"user_ids": ["bob"]}, django_capture_on_commit_callbacks).json()
    # Then the message's content names him
    assert body["content"] == "@bob"


def test_the_agent_tool_mentions_with_actor_null(alice_api, make_investigation, django_capture_on_commit_callbacks):
    # Given alice's investigation
    investigation = make_investigation()
    # When she asks the agent in its chat to mention bob and carol with a note
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_api.post(
            f"/a/rca/items/{investigation.pk}/messages", {"content": "@mention bob carol: please look"}, format="json"
        )
    # Then the agent says so, and the mention and its notifications are stored with no person as author or actor
    assert response.json()["replies"][0]["content"] == "I mentioned bob, carol."
    mention = ItemMessage.objects.get(role="mention")
    assert (mention.mentions, mention.created_by, mention.content) == (["bob", "carol"], "", "please look")
    sent = Notification.objects.order_by("recipient").values_list("recipient", "actor")
    assert list(sent) == [("bob", None), ("carol", None)]
    # And neither became a member by it
    assert not InvestigationMember.objects.exists()


def test_the_agent_tool_reports_unknown_users_and_sends_nothing(alice_api, make_investigation):
    # Given alice's investigation
    investigation = make_investigation()
    # When she asks the agent to mention zed, who is not in the directory
    reply = alice_api.post(
        f"/a/rca/items/{investigation.pk}/messages", {"content": "@mention zed"}, format="json"
    ).json()["replies"][0]["content"]
    # Then the agent reports the refusal and no mention is stored
    assert reply == "I could not do that: Not in the user directory: zed."
    assert not ItemMessage.objects.filter(role="mention").exists()

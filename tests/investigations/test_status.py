"""Status moves: any move but into the current status, notified to everyone but the mover."""

from __future__ import annotations

import itertools

import pytest

from collab.models import Notification
from workspace.agent.models import ItemMessage
from workspace.investigations.models import Investigation

pytestmark = pytest.mark.django_db
STATUSES = Investigation.Status.values


def _move(api, investigation, status, capture):
    with capture(execute=True):
        return api.post(f"/investigations/{investigation.pk}/status", {"status": status}, format="json")


def test_a_move_notifies_owner_and_members_except_the_actor(
    bob_api, make_investigation, django_capture_on_commit_callbacks
):
    # Given alice's investigation with bob and carol as members
    investigation = make_investigation(title="Disk alerts", owner="alice", members=("bob", "carol"))
    # When bob moves it to in progress
    response = _move(bob_api, investigation, "in_progress", django_capture_on_commit_callbacks)
    # Then the move is stored, and alice and carol are notified by bob with a link to it, bob is not
    assert response.status_code == 200
    assert response.json()["status"] == "in_progress"
    sent = Notification.objects.order_by("recipient").values_list("recipient", "kind", "actor", "link")
    link = f"/investigations/{investigation.pk}"
    assert list(sent) == [("alice", "status", "bob", link), ("carol", "status", "bob", link)]


@pytest.mark.parametrize(("before", "after"), list(itertools.permutations(STATUSES, 2)))
def test_every_move_except_into_the_current_status_is_allowed(alice_api, make_investigation, before, after):
    # Given an investigation in one status
    investigation = make_investigation()
    Investigation.objects.filter(pk=investigation.pk).update(status=before)
    # When alice moves it into any other status
    response = alice_api.post(f"/investigations/{investigation.pk}/status", {"status": after}, format="json")
    # Then the move is stored
    assert response.status_code == 200
    investigation.refresh_from_db()
    assert investigation.status == after


@pytest.mark.parametrize("status", STATUSES)
def test_a_move_into_the_current_status_is_refused(alice_api, make_investigation, status):
    # Given an investigation in one status
    investigation = make_investigation()
    Investigation.objects.filter(pk=investigation.pk).update(status=status)
    # When alice moves it into that same status
    response = alice_api.post(f"/investigations/{investigation.pk}/status", {"status": status}, format="json")
    # Then it is 400 status_unchanged and nobody is notified
    assert (response.status_code, response.json()["error"]) == (400, "status_unchanged")
    assert not Notification.objects.exists()


@pytest.mark.parametrize("body", [{}, {"status": "done"}, {"status": ["open"]}, {"status": None}])
def test_an_unknown_status_is_refused(alice_api, make_investigation, body):
    # Given an open investigation
    investigation = make_investigation()
    # When alice moves it with no status, an unknown one, a list or null / Then it is 400
    assert alice_api.post(f"/investigations/{investigation.pk}/status", body, format="json").status_code == 400
    # Then it stays open
    investigation.refresh_from_db()
    assert investigation.status == "open"


def test_a_stranger_cannot_move_the_status(carol_api, make_investigation):
    # Given alice's investigation with bob as member
    investigation = make_investigation(owner="alice", members=("bob",))
    # When carol, a stranger, moves its status
    response = carol_api.post(f"/investigations/{investigation.pk}/status", {"status": "closed"}, format="json")
    # Then it is 404
    assert response.status_code == 404


def test_a_move_leaves_a_system_message_in_the_conversation(
    alice_api, make_investigation, django_capture_on_commit_callbacks
):
    # Given alice's open investigation
    investigation = make_investigation()
    # When she moves it to resolved
    _move(alice_api, investigation, "resolved", django_capture_on_commit_callbacks)
    # Then the conversation holds a system message saying who moved it from where to where
    message = ItemMessage.objects.get()
    assert (message.role, message.content) == ("system", "Alice Martin moved the status from Open to Resolved.")


def test_when_the_agent_flips_the_status_everyone_is_notified_with_actor_null(
    alice_api, make_investigation, django_capture_on_commit_callbacks
):
    # Given alice's investigation with bob as member
    investigation = make_investigation(owner="alice", members=("bob",))
    # When she asks the agent in its chat to move the status to resolved
    with django_capture_on_commit_callbacks(execute=True):
        alice_api.post(f"/a/rca/items/{investigation.pk}/messages", {"content": "@status resolved"}, format="json")
    # Then it is resolved, and both are notified with no actor, alice included
    investigation.refresh_from_db()
    assert investigation.status == "resolved"
    sent = Notification.objects.order_by("recipient").values_list("recipient", "kind", "actor")
    assert list(sent) == [("alice", "status", None), ("bob", "status", None)]

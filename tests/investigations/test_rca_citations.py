"""RCA citations: the agent's knowledge-base answers inside an investigation become `rca` events."""

from __future__ import annotations

import pytest

from knowledge.models import CitationEvent

pytestmark = pytest.mark.django_db
QUESTION = "How do I free sandbox quota capacity?"


def test_an_answer_inside_an_investigation_writes_rca_events_for_the_asker(bob_api, make_investigation, handbook):
    # Given alice's investigation with bob as a member, and a handbook that answers the question
    investigation = make_investigation(owner="alice", members=("bob",))
    # When bob asks the agent in the investigation
    reply = bob_api.post(f"/a/rca/items/{investigation.pk}/messages", {"content": QUESTION}, format="json")
    # Then each cited marker is one rca event of this investigation, cited by bob
    citations = reply.json()["replies"][0]["citations"]
    events = list(CitationEvent.objects.values_list("origin_kind", "origin_id", "cited_by", "collection_id"))
    assert citations
    assert events[0] == ("rca", str(investigation.pk), "bob", handbook.id)
    assert len(events) == len(citations)


def test_two_questions_count_twice(alice_api, make_investigation, handbook):
    # Given an investigation and a handbook that answers the question
    investigation = make_investigation()
    # When the same question is sent twice
    for _ in range(2):
        alice_api.post(f"/a/rca/items/{investigation.pk}/messages", {"content": QUESTION}, format="json")
    # Then each answer has its own events: two answers are no replay of one
    per_turn = CitationEvent.objects.values("message_id").distinct().count()
    assert per_turn == 2


def test_an_answer_that_found_nothing_writes_no_event(alice_api, make_investigation, handbook):
    # Given an investigation
    investigation = make_investigation()
    # When the agent is asked something no document covers
    alice_api.post(f"/a/rca/items/{investigation.pk}/messages", {"content": "zxqv wvut?"}, format="json")
    # Then no event is written
    assert not CitationEvent.objects.exists()

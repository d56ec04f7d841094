"""RCA citations: the agent's knowledge-base answers inside an investigation become `rca` events."""

from __future__ import annotations

import pytest

from knowledge.models import CitationEvent
from workspace.agent.models import ItemMessage
from workspace.agent.turns import agent_turn_run
from workspace.items.config import get_config

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


def test_an_agent_turn_run_again_for_the_same_question_does_not_count_twice(alice_api, make_investigation, handbook):
    # Given an investigation whose question the agent answered with citations
    investigation = make_investigation()
    alice_api.post(f"/a/rca/items/{investigation.pk}/messages", {"content": QUESTION}, format="json")
    question = ItemMessage.objects.get(item_id=investigation.pk, role=ItemMessage.Role.USER)
    recorded = CitationEvent.objects.count()
    # When the turn runs again for that same question message, as a retry after a crash would
    replies = agent_turn_run(item=question.item, app=get_config().app("rca"), user_id="alice", message=question)
    # Then the answer is the same (the question message and the question's number in the turn), so
    # the citations it shows again are not counted again
    assert recorded > 0
    assert replies[0].citations
    assert CitationEvent.objects.count() == recorded

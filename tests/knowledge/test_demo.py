"""The demo loader: a handbook that answers with citations at once, loaded idempotently."""

from __future__ import annotations

import pytest

from knowledge import demo
from knowledge.answers import answer_question
from knowledge.models import CitationEvent, Collection, Document, KbChat

pytestmark = pytest.mark.django_db


def test_demo_handbook_answers_a_new_users_question_with_citations():
    demo.load(say=lambda line: None)
    collection = Collection.objects.get(name=demo.COLLECTION_NAME)

    answer = answer_question(question="Who can send messages in a shared chat?", collection_ids=[collection.id])

    assert answer.citations
    assert answer.citations[0].document_name == "sharing.md"
    assert "[1]" in answer.text


def test_demo_loads_ready_documents_and_a_chat_shared_with_bob():
    demo.load(say=lambda line: None)

    assert set(Document.objects.values_list("status", flat=True)) == {"ready"}
    chat = KbChat.objects.get(title=demo.CHAT_TITLE)
    assert list(chat.shares.values_list("user_id", flat=True)) == ["bob"]
    assert chat.messages.filter(role="assistant").get().citations


def test_loading_the_demo_twice_duplicates_nothing():
    lines: list[str] = []
    demo.load(say=lines.append)
    counts = (
        Collection.objects.count(),
        Document.objects.count(),
        KbChat.objects.count(),
        CitationEvent.objects.count(),
    )

    demo.load(say=lines.append)

    assert (
        Collection.objects.count(),
        Document.objects.count(),
        KbChat.objects.count(),
        CitationEvent.objects.count(),
    ) == counts
    assert len(lines) == len(set(lines))

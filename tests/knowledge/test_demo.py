"""The demo loader: a handbook that answers with citations at once, loaded idempotently."""

from __future__ import annotations

import pytest

from knowledge import demo
from knowledge.answers import answer_question
from knowledge.models import Chunk, CitationEvent, Collection, Document, KbChat

pytestmark = pytest.mark.django_db


def test_demo_handbook_answers_a_new_users_question_with_citations():
    # Given the demo loaded into an empty database
    demo.load(say=lambda line: None)
    collection = Collection.objects.get(name=demo.COLLECTION_NAME)

    # When a new user asks who can send messages in a shared chat
    answer = answer_question(question="Who can send messages in a shared chat?", collection_ids=[collection.id])

    # Then the answer cites sharing.md as marker [1]
    assert answer.citations
    assert answer.citations[0].document_name == "sharing.md"
    assert "[1]" in answer.text


def test_demo_loads_ready_documents_and_a_chat_shared_with_bob():
    # Given an empty database
    # When the demo loads
    demo.load(say=lambda line: None)

    # Then its documents are ready and its chat, shared with bob, holds an answer with citations
    assert set(Document.objects.values_list("status", flat=True)) == {"ready"}
    chat = KbChat.objects.get(title=demo.CHAT_TITLE)
    assert list(chat.shares.values_list("user_id", flat=True)) == ["bob"]
    assert chat.messages.filter(role="assistant").get().citations


def test_demo_documents_chunk_under_their_heading_without_repeating_it():
    # Given an empty database
    # When the demo loads
    demo.load(say=lambda line: None)

    # Then every chunk of every handbook document is titled with the document's heading, which no
    # chunk's text repeats, and each is a passage of at most 700 characters
    for document in Document.objects.all():
        heading = (demo.DOCS_DIR / document.filename).read_text().splitlines()[0].lstrip("# ")
        chunks = list(Chunk.objects.filter(document=document))
        assert chunks
        assert {chunk.title for chunk in chunks} == {heading}
        assert not any(chunk.text.startswith(heading) or len(chunk.text) > 700 for chunk in chunks)


def test_loading_the_demo_twice_duplicates_nothing():
    # Given the demo loaded once
    lines: list[str] = []
    demo.load(say=lines.append)
    counts = (
        Collection.objects.count(),
        Document.objects.count(),
        KbChat.objects.count(),
        CitationEvent.objects.count(),
    )

    # When it is loaded again
    demo.load(say=lines.append)

    # Then nothing is added, and no line was said twice
    assert (
        Collection.objects.count(),
        Document.objects.count(),
        KbChat.objects.count(),
        CitationEvent.objects.count(),
    ) == counts
    assert len(lines) == len(set(lines))

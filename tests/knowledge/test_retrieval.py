"""Lexical retrieval behind one interface (FTS5 on SQLite, full-text search on PostgreSQL)."""

from __future__ import annotations

import pytest

from knowledge.models import Chunk
from knowledge.search import get_chunk_index, search_terms

pytestmark = pytest.mark.django_db


def test_search_finds_the_chunk_that_answers(handbook):
    hits = get_chunk_index().search(question="Who can read a shared chat?", collection_ids=[handbook.id], limit=5)

    assert hits
    assert Chunk.objects.get(pk=hits[0].chunk_id).document.filename == "sharing.md"


def test_search_matches_word_forms(handbook):
    hits = get_chunk_index().search(question="evicting capacities", collection_ids=[handbook.id], limit=5)

    assert [Chunk.objects.get(pk=hit.chunk_id).document.filename for hit in hits] == ["quotas.md"]


def test_search_stays_inside_the_given_collections(handbook, make_collection, upload):
    other = make_collection("Other")
    upload(other.id, "other.txt", "Sharing chats is also described here.")

    hits = get_chunk_index().search(question="sharing chats", collection_ids=[other.id], limit=5)

    assert {Chunk.objects.get(pk=hit.chunk_id).collection_id for hit in hits} == {other.id}


@pytest.mark.parametrize("question", ['"quota', "quota OR", "NEAR(quota", "quota*", "col:quota", "quota & | !", "-"])
def test_search_treats_query_syntax_as_plain_words(handbook, question):
    hits = get_chunk_index().search(question=question, collection_ids=[handbook.id], limit=5)

    assert isinstance(hits, list)


def test_a_question_of_only_common_words_finds_nothing(handbook):
    assert get_chunk_index().search(question="how do I", collection_ids=[handbook.id], limit=5) == []


def test_search_terms_drop_stopwords_and_repeats():
    assert search_terms("How do I share the chat, the CHAT?") == ["share", "chat"]


def test_removed_document_chunks_are_no_longer_found(handbook, upload):
    upload(handbook.id, "sharing.md", "Nothing about that any more.", content_type="text/markdown")

    hits = get_chunk_index().search(question="readers notification", collection_ids=[handbook.id], limit=5)

    assert all(Chunk.objects.get(pk=hit.chunk_id).document.filename != "sharing.md" for hit in hits)

"""Lexical retrieval behind one interface (FTS5 on SQLite, full-text search on PostgreSQL)."""

from __future__ import annotations

import pytest

from knowledge.models import Chunk
from knowledge.search import get_chunk_index, search_terms

pytestmark = pytest.mark.django_db


def test_search_finds_the_chunk_that_answers(handbook):
    # Given the handbook
    # When the index is searched for who can read a shared chat
    hits = get_chunk_index().search(question="Who can read a shared chat?", collection_ids=[handbook.id], limit=5)

    # Then the best hit is a chunk of sharing.md
    assert hits
    assert Chunk.objects.get(pk=hits[0].chunk_id).document.filename == "sharing.md"


def test_search_matches_word_forms(handbook):
    # Given the handbook, whose quotas.md says evicted and capacity
    # When the index is searched for evicting capacities
    hits = get_chunk_index().search(question="evicting capacities", collection_ids=[handbook.id], limit=5)

    # Then the word forms match and quotas.md is the one hit
    assert [Chunk.objects.get(pk=hit.chunk_id).document.filename for hit in hits] == ["quotas.md"]


def test_search_stays_inside_the_given_collections(handbook, make_collection, upload):
    # Given the handbook, and another collection that also speaks of sharing chats
    other = make_collection("Other")
    upload(other.id, "other.txt", "Sharing chats is also described here.")

    # When only the other collection is searched for sharing chats
    hits = get_chunk_index().search(question="sharing chats", collection_ids=[other.id], limit=5)

    # Then every hit comes from it
    assert {Chunk.objects.get(pk=hit.chunk_id).collection_id for hit in hits} == {other.id}


@pytest.mark.parametrize("question", ['"quota', "quota OR", "NEAR(quota", "quota*", "col:quota", "quota & | !", "-"])
def test_search_treats_query_syntax_as_plain_words(handbook, question):
    # Given the handbook
    # When the question holds full-text query syntax
    hits = get_chunk_index().search(question=question, collection_ids=[handbook.id], limit=5)

    # Then it is searched as plain words and gives a list, never an error
    assert isinstance(hits, list)


def test_a_question_of_only_common_words_finds_nothing(handbook):
    # Given the handbook
    # When the question is only common words / Then nothing is found
    assert get_chunk_index().search(question="how do I", collection_ids=[handbook.id], limit=5) == []


def test_search_terms_drop_stopwords_and_repeats():
    # Given a question with stopwords, mixed case and a repeated word
    # When its search terms are taken / Then only the words that count remain, once each, in lower case
    assert search_terms("How do I share the chat, the CHAT?") == ["share", "chat"]


def test_removed_document_chunks_are_no_longer_found(handbook, upload):
    # Given the handbook whose sharing.md is replaced by a text about nothing it said
    upload(handbook.id, "sharing.md", "Nothing about that any more.", content_type="text/markdown")

    # When the index is searched for readers and notifications
    hits = get_chunk_index().search(question="readers notification", collection_ids=[handbook.id], limit=5)

    # Then nothing is found in the old sharing.md chunks
    assert all(Chunk.objects.get(pk=hit.chunk_id).document.filename != "sharing.md" for hit in hits)

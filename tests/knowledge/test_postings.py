"""The postings and chunk counts the PostgreSQL BM25 query reads (knowledge/search/postgres.py):
they always equal what the chunks' tsvectors say, after uploads, re-uploads, deletes, ingests
racing each other, and for chunks stored before the migration that made them."""

from __future__ import annotations

import importlib
import threading
from typing import Any

import pytest
from django.db import connection, connections, transaction

from collab.actor import Actor
from knowledge import services
from knowledge.chunking import ChunkText
from knowledge.ingest import document_chunks_store
from knowledge.models import Collection, Document
from knowledge.search import get_chunk_index

postings_migration = importlib.import_module("knowledge.migrations.0009_chunk_terms")

BACKUPS = "# Backups\n\nDatabase backups are kept for thirty days, then deleted. Backups backups."
RUNBOOK = "# Runbook\n\nWhen requests time out, first check the database connection pool."

pytestmark = pytest.mark.postgres(reason="the postings exist on PostgreSQL; SQLite's FTS5 keeps its own")


def _rows(sql: str, params: list[Any] | None = None) -> set[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return set(cursor.fetchall())


# Each read is limited to the collections this test made: the tables are not Django models, so a
# test that commits (the race below, or another module's) leaves its rows behind.
def _postings(*collections: Collection) -> set[tuple[Any, ...]]:
    return _rows(
        "SELECT collection_id, lexeme, chunk_id, often, size FROM knowledge_chunk_term WHERE collection_id = ANY(%s)",
        [[collection.id for collection in collections]],
    )


def _postings_of_the_chunks(*collections: Collection) -> set[tuple[Any, ...]]:
    return _rows(
        "SELECT chunk.collection_id, word.lexeme, chunk.id, cardinality(word.positions), length(chunk.search_vector) "
        "FROM knowledge_chunk AS chunk, unnest(chunk.search_vector) AS word WHERE chunk.collection_id = ANY(%s)",
        [[collection.id for collection in collections]],
    )


def _counts(*collections: Collection) -> set[tuple[Any, ...]]:
    return _rows(
        "SELECT collection_id, chunks, lexemes FROM knowledge_collection_chunks "
        "WHERE chunks > 0 AND collection_id = ANY(%s)",
        [[collection.id for collection in collections]],
    )


def _counts_of_the_chunks(*collections: Collection) -> set[tuple[Any, ...]]:
    return _rows(
        "SELECT collection_id, count(*), sum(length(search_vector)) FROM knowledge_chunk "
        "WHERE collection_id = ANY(%s) GROUP BY collection_id",
        [[collection.id for collection in collections]],
    )


@pytest.mark.django_db
def test_postings_and_counts_follow_uploads_reuploads_and_deletes(make_collection, upload):
    # Given two collections with documents, one re-uploaded with other words
    ops, garden = make_collection("Ops"), make_collection("Garden")
    upload(ops.id, "backups.md", BACKUPS, content_type="text/markdown")
    upload(ops.id, "runbook.md", RUNBOOK, content_type="text/markdown")
    upload(garden.id, "tomatoes.md", "# Tomatoes\n\nWater them every morning.", content_type="text/markdown")
    upload(ops.id, "backups.md", "# Backups\n\nSnapshots are kept for a week.\n\n# More\n\nAnd copied offsite.")
    assert _postings(ops, garden)
    assert _postings(ops, garden) == _postings_of_the_chunks(ops, garden)
    assert _counts(ops, garden) == _counts_of_the_chunks(ops, garden)

    # When a document and then a whole collection are deleted
    runbook = Document.objects.get(collection=ops, filename="runbook.md")
    services.document_delete(document_id=runbook.id, actor=Actor("alice"))
    assert _postings(ops) == _postings_of_the_chunks(ops)
    assert _counts(ops) == _counts_of_the_chunks(ops)
    services.collection_delete(collection_id=garden.id, actor=Actor("alice"))

    # Then the postings and counts are still exactly those of the chunks left, none of the deleted collection
    assert _postings(ops, garden) == _postings_of_the_chunks(ops, garden)
    assert _counts(ops, garden) == _counts_of_the_chunks(ops, garden)
    assert {collection_id for collection_id, *_ in _postings(ops, garden)} == {ops.id}
    assert _rows("SELECT 1 FROM knowledge_collection_chunks WHERE collection_id = %s", [garden.id]) == set()


@pytest.mark.django_db
def test_the_migration_gives_chunks_stored_before_it_their_postings_and_counts(make_collection, upload):
    # Given chunks stored while the postings were being kept
    ops = make_collection("Ops")
    upload(ops.id, "backups.md", BACKUPS, content_type="text/markdown")
    upload(ops.id, "runbook.md", RUNBOOK, content_type="text/markdown")
    expected_postings, expected_counts = _postings(ops), _counts(ops)

    # When the migration is reversed and applied again (PostgreSQL runs DDL in the test's transaction)
    with connection.cursor() as cursor:
        for statement in postings_migration.POSTGRES_DROP + postings_migration.POSTGRES_CREATE:
            cursor.execute(statement)

    # Then the tables it made hold the same postings and counts
    assert _postings(ops) == expected_postings
    assert _counts(ops) == expected_counts


@pytest.mark.django_db
def test_a_lexical_search_is_one_query(make_collection, upload, django_assert_max_num_queries):
    # Given two collections with documents
    ops, other = make_collection("Ops"), make_collection("Other")
    upload(ops.id, "backups.md", BACKUPS, content_type="text/markdown")
    upload(other.id, "runbook.md", RUNBOOK, content_type="text/markdown")

    # When both are searched / Then postings, counts and ranking are one statement
    with django_assert_max_num_queries(1):
        hits = get_chunk_index().search(question="database backups", collection_ids=[ops.id, other.id], limit=10)
    assert len(hits) == 2


def _store(document: Document, text: str) -> None:
    document_chunks_store(
        document_id=document.id,
        content_version=document.content_version,
        chunks=[ChunkText(text=f"{text} {number}", title="", page=None) for number in range(3)],
        user_id="alice",
    )


@pytest.mark.django_db(transaction=True)
def test_two_ingests_of_one_collection_racing_both_count(make_collection):
    # Given two documents of one collection
    collection: Collection = make_collection("Ops")
    first, second = (
        services.document_upload(
            collection_id=collection.id, actor=Actor("alice"), filename=name, content_type="text/plain", data=b"x"
        )
        for name in ("first.txt", "second.txt")
    )
    holding, release = threading.Event(), threading.Event()

    def ingest_first() -> None:
        try:
            with transaction.atomic():
                _store(first, "backups are kept")
                holding.set()
                release.wait(30)
        finally:
            connections.close_all()

    def ingest_second() -> None:
        holding.wait(30)
        try:
            _store(second, "snapshots are copied")
        finally:
            connections.close_all()

    # When the second ingest stores its chunks while the first has stored its own and not committed
    threads = [threading.Thread(target=ingest_first), threading.Thread(target=ingest_second)]
    for thread in threads:
        thread.start()
    holding.wait(30)
    for _ in range(3000):
        waiting = _rows(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        if waiting != {(0,)} or not threads[1].is_alive():
            break
        threading.Event().wait(0.01)
    release.set()
    for thread in threads:
        thread.join(30)

    # Then the collection counts the chunks of both, and the postings are both documents' words
    assert _counts(collection) == _counts_of_the_chunks(collection)
    assert {(collection_id, chunks) for collection_id, chunks, _ in _counts(collection)} == {(collection.id, 6)}
    assert _postings(collection) == _postings_of_the_chunks(collection)
    services.collection_delete(collection_id=collection.id, actor=Actor("alice"))  # leaves no rows behind

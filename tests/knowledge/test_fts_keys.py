"""SQLite's search index forgets a document or a collection by key, not by scanning the index."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge.models import Collection, Document
from knowledge.search import get_chunk_index
from knowledge.search.sqlite import FTS_TABLE, KEY_TABLE

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.sqlite(
        reason="the FTS5 index and its keys exist on SQLite; PostgreSQL searches a column of the chunk row"
    ),
]

key_migration = importlib.import_module("knowledge.migrations.0006_chunk_fts_keys")


def _rows(sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchall()


class _SchemaStatements:
    """What the migration's function uses of a schema editor, inside the test's transaction (a real
    SQLite schema editor refuses to open inside one)."""

    connection = connection

    def execute(self, sql: str) -> None:
        _rows(sql)


def _fts_rows() -> set[tuple[int, str, str]]:
    return set(_rows(f"SELECT rowid, document_id, collection_id FROM {FTS_TABLE}"))


def _key_rows() -> set[tuple[int, str, str]]:
    return set(_rows(f"SELECT fts_rowid, document_id, collection_id FROM {KEY_TABLE}"))


def test_every_indexed_chunk_has_its_key(handbook: Collection) -> None:
    # Given the handbook, indexed by its ingest
    # When the search index and its keys are read
    # Then each FTS5 row has one key naming its document and collection
    assert _fts_rows()
    assert _key_rows() == _fts_rows()


def test_forgetting_a_document_removes_its_rows_and_keys_and_nothing_else(handbook: Collection) -> None:
    # Given the handbook's two indexed documents
    gone, kept = Document.objects.filter(collection=handbook).order_by("filename")[:2]
    # When the index forgets one of them
    get_chunk_index().forget_document(document_id=gone.id)
    # Then its rows and keys are gone, and the other document's remain, still in step
    assert {document for _, document, _ in _fts_rows()} == {kept.id}
    assert _key_rows() == _fts_rows()


def test_forgetting_a_collection_removes_its_rows_and_keys_and_nothing_else(
    handbook: Collection, make_collection: Any, upload: Any
) -> None:
    # Given the handbook and another indexed collection
    other = make_collection("Other")
    upload(other.id, "other.txt", "Another text about sharing chats.")
    # When the index forgets the handbook
    get_chunk_index().forget_collection(collection_id=handbook.id)
    # Then only the other collection's rows and keys remain
    assert {collection for _, _, collection in _fts_rows()} == {other.id}
    assert _key_rows() == _fts_rows()


@pytest.mark.parametrize("forget", ["document", "collection"])
def test_forgetting_looks_rows_up_by_key_instead_of_scanning_the_index(handbook: Collection, forget: str) -> None:
    # Given the handbook's indexed documents
    document = Document.objects.filter(collection=handbook).first()
    # When the index forgets a document or the collection
    with CaptureQueriesContext(connection) as captured:
        if forget == "document":
            get_chunk_index().forget_document(document_id=document.id)
        else:
            get_chunk_index().forget_collection(collection_id=handbook.id)
    # Then every statement finds its rows through an index: FTS5 rows by rowid, keys by their column
    plans = [step for query in captured.captured_queries for *_, step in _rows("EXPLAIN QUERY PLAN " + query["sql"])]
    assert f"SCAN {FTS_TABLE} VIRTUAL TABLE INDEX 0:=" in plans
    full_scans = {f"SCAN {FTS_TABLE} VIRTUAL TABLE INDEX 0:", f"SCAN {KEY_TABLE}"}
    scans = [step for step in plans if step in full_scans]
    assert scans == []


def test_the_migration_gives_rows_indexed_before_it_their_keys(handbook: Collection) -> None:
    # Given an index whose rows were written before the key table existed
    before = _fts_rows()
    key_migration._run_on_sqlite(key_migration.SQLITE_DROP)(None, _SchemaStatements())
    # When the migration runs
    key_migration._run_on_sqlite(key_migration.SQLITE_CREATE)(None, _SchemaStatements())
    # Then every row has its key, and forgetting a document finds its rows through them
    assert _key_rows() == before
    document = Document.objects.filter(collection=handbook).first()
    get_chunk_index().forget_document(document_id=document.id)
    assert document.id not in {document_id for _, document_id, _ in _fts_rows()}
    assert _key_rows() == _fts_rows()


def test_a_reader_deleting_someone_elses_document_leaves_its_rows_and_keys(
    handbook: Collection, api_client_for: Any
) -> None:
    # Given alice's indexed handbook
    document = Document.objects.filter(collection=handbook).first()
    rows, keys = _fts_rows(), _key_rows()
    # When bob, who only reads it, deletes one of its documents
    response = api_client_for("bob").delete(f"/kb/documents/{document.id}")
    # Then he is refused and the search index and its keys are as they were
    assert response.status_code == 403
    assert (_fts_rows(), _key_rows()) == (rows, keys)


def test_a_document_delete_that_dies_halfway_leaves_its_rows_and_keys(
    handbook: Collection, alice_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given alice's indexed handbook
    document = Document.objects.filter(collection=handbook).first()
    rows, keys = _fts_rows(), _key_rows()

    # When her delete dies after the search rows and keys went but before the document did
    def crash(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("killed halfway")

    monkeypatch.setattr(Document, "delete", crash)
    with pytest.raises(RuntimeError):
        alice_api.delete(f"/kb/documents/{document.id}")
    # Then the transaction took it all back: every row and key is still there, in step
    assert (_fts_rows(), _key_rows()) == (rows, keys)

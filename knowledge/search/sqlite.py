"""SQLite FTS5: a separate virtual table the service code keeps in step with the chunks."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from knowledge.search.base import SearchHit, search_terms

FTS_TABLE = "knowledge_chunk_fts"
# Which FTS5 rowids hold a document's and a collection's chunks, indexed: the FTS5 table's own
# document_id and collection_id columns are UNINDEXED, and deleting by them scans the whole index.
KEY_TABLE = "knowledge_chunk_fts_key"
# Both tables are created by migrations 0002 and 0006 (only on SQLite).


class Fts5ChunkIndex:
    """Rows are written by this class rather than triggers: a chunk's string primary key leaves
    SQLite's rowid unstable across VACUUM, so the virtual table keys on `chunk_id` instead, and each
    FTS5 row takes its rowid from the key table, where its document and collection are indexed."""

    # bm25 weighs rare words up and ranks well on its own (bench/retrieval.py: nDCG@10 0.92 against
    # 0.87 for dense retrieval), so it takes half of a fused score.
    fusion_weight = 0.5

    def index_chunks(self, *, rows: Sequence[tuple[str, str, str, str]]) -> None:
        if not rows:
            return
        with connection.cursor() as cursor:
            # Rowids follow the highest key: the caller's transaction holds SQLite's one write lock
            # (BEGIN IMMEDIATE), so no other writer takes them meanwhile; a clash would fail on the key.
            cursor.execute(f"SELECT coalesce(max(fts_rowid), 0) FROM {KEY_TABLE}")
            first = cursor.fetchone()[0] + 1
            keyed = [(first + offset, *row) for offset, row in enumerate(rows)]
            cursor.executemany(
                f"INSERT INTO {KEY_TABLE} (fts_rowid, document_id, collection_id) VALUES (%s, %s, %s)",
                [(rowid, document_id, collection_id) for rowid, _, document_id, collection_id, _ in keyed],
            )
            cursor.executemany(
                f"INSERT INTO {FTS_TABLE} (rowid, chunk_id, document_id, collection_id, text) "
                "VALUES (%s, %s, %s, %s, %s)",
                keyed,
            )

    def forget_document(self, *, document_id: str) -> None:
        self._forget("document_id", document_id)

    def forget_collection(self, *, collection_id: str) -> None:
        self._forget("collection_id", collection_id)

    def _forget(self, column: str, value: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {FTS_TABLE} WHERE rowid IN (SELECT fts_rowid FROM {KEY_TABLE} WHERE {column} = %s)",
                [value],
            )
            cursor.execute(f"DELETE FROM {KEY_TABLE} WHERE {column} = %s", [value])

    def search(self, *, question: str, collection_ids: Sequence[str], limit: int) -> list[SearchHit]:
        terms = search_terms(question)
        if not terms or not collection_ids:
            return []
        # Each term is an FTS5 string literal, so no user text is read as query syntax.
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        placeholders = ", ".join(["%s"] * len(collection_ids))
        sql = (
            f"SELECT chunk_id, bm25({FTS_TABLE}) AS rank FROM {FTS_TABLE} "
            f"WHERE {FTS_TABLE} MATCH %s AND collection_id IN ({placeholders}) ORDER BY rank, chunk_id LIMIT %s"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [match, *collection_ids, limit])
            # bm25() is lower-is-better; flip it so every index reports higher-is-better.
            return [SearchHit(chunk_id=chunk_id, score=-rank) for chunk_id, rank in cursor.fetchall()]

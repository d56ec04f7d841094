"""PostgreSQL full-text search: a generated tsvector column on the chunk table with a GIN index."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from knowledge.search.base import SearchHit, search_terms

SEARCH_CONFIG = "english"
# The `search_vector` column and its GIN index are created by migration 0002 (only on PostgreSQL).


class PostgresChunkIndex:
    """The column is computed by PostgreSQL on insert, so indexing and forgetting are no-ops."""

    # ts_rank_cd counts how often and how near the words occur but not how rare they are, and ranks
    # below dense retrieval on its own (bench/retrieval.py: nDCG@10 0.75 against 0.87), so it takes
    # less than half of a fused score (0.3: fused nDCG@10 0.90, against 0.88 at half).
    fusion_weight = 0.3

    def index_chunks(self, *, rows: Sequence[tuple[str, str, str, str]]) -> None:
        return None

    def forget_document(self, *, document_id: str) -> None:
        return None

    def forget_collection(self, *, collection_id: str) -> None:
        return None

    def search(self, *, question: str, collection_ids: Sequence[str], limit: int) -> list[SearchHit]:
        terms = search_terms(question)
        if not terms or not collection_ids:
            return []
        # OR of the terms: a question's words rarely all appear in the passage that answers it.
        query = " | ".join(terms)
        sql = (
            "SELECT id, ts_rank_cd(search_vector, query) AS score "
            f"FROM knowledge_chunk, to_tsquery('{SEARCH_CONFIG}', %s) AS query "
            "WHERE search_vector @@ query AND collection_id = ANY(%s) ORDER BY score DESC, id LIMIT %s"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [query, list(collection_ids), limit])
            return [SearchHit(chunk_id=chunk_id, score=float(score)) for chunk_id, score in cursor.fetchall()]

"""PostgreSQL full-text search: a generated tsvector column on the chunk table (with a GIN index),
and postings of its lexemes with each collection's chunk count, ranked like BM25 in SQL."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from knowledge.search.base import SearchHit, search_terms

SEARCH_CONFIG = "english"
# The `search_vector` column is created by migration 0002 (the title added by 0007), the postings
# table `knowledge_chunk_term` and the counts table `knowledge_collection_chunks` by 0009: all only
# on PostgreSQL.

# BM25's two constants, at the values Robertson and Zaragoza ("The Probabilistic Relevance
# Framework: BM25 and Beyond", 2009) and SQLite's FTS5 use: k1 bounds what repeating a word adds,
# b how much a long chunk is discounted.
K1 = 1.2
B = 0.75

# The postings of the question's lexemes in the scope's collections, read from the postings'
# primary key alone (collection, lexeme, chunk; it includes how often the chunk uses the lexeme
# and the chunk's length): these are exactly the chunks holding any of the words. A word's
# document frequency in the scope is its number of postings there; the scope's number of chunks
# and their average length come from its collections' counts, as in BM25 and FTS5 (the average of
# the whole scope, not of the chunks that match). Reading how often a chunk uses a word from its
# tsvector instead (unnest of every matching chunk) and counting the scope's chunks took most of
# the query's time at 10^5 chunks (bench/hybrid_search.py).
_BM25 = f"""
WITH uses AS (
    SELECT term.chunk_id, term.lexeme, term.often, term.size
    FROM knowledge_chunk_term AS term
    WHERE term.collection_id = ANY(%(scope)s)
      AND term.lexeme = ANY(tsvector_to_array(to_tsvector('{SEARCH_CONFIG}', %(words)s)))
),
scope AS (
    SELECT coalesce(sum(counted.chunks), 0)::float8 AS chunks,
           greatest(coalesce(sum(counted.lexemes), 0)::float8 / greatest(sum(counted.chunks), 1), 1) AS size
    FROM knowledge_collection_chunks AS counted
    WHERE counted.collection_id = ANY(%(scope)s)
),
rarity AS (
    SELECT uses.lexeme, ln(1 + (scope.chunks - count(*) + 0.5) / (count(*) + 0.5)) AS idf
    FROM uses, scope
    GROUP BY uses.lexeme, scope.chunks
)
SELECT uses.chunk_id,
       sum(rarity.idf * uses.often * {K1 + 1}
           / (uses.often + {K1} * (1 - {B} + {B} * uses.size / scope.size))) AS score
FROM uses JOIN rarity USING (lexeme), scope
GROUP BY uses.chunk_id
ORDER BY score DESC, uses.chunk_id
LIMIT %(limit)s
"""

# A chunk's postings come from its stored tsvector: one per lexeme, with the number of its
# positions (how often the chunk uses it) and the vector's length.
_ADD_POSTINGS = """
INSERT INTO knowledge_chunk_term (collection_id, lexeme, chunk_id, often, size)
SELECT chunk.collection_id, word.lexeme, chunk.id, cardinality(word.positions), length(chunk.search_vector)
FROM knowledge_chunk AS chunk, unnest(chunk.search_vector) AS word
WHERE chunk.id = ANY(%(chunk_ids)s)
"""
# Counts are added to, never written as read: two ingests of one collection committing at once
# both count (the second waits on the first's row lock, then adds to what it committed).
_ADD_COUNTS = """
INSERT INTO knowledge_collection_chunks AS counted (collection_id, chunks, lexemes)
SELECT chunk.collection_id, count(*), coalesce(sum(length(chunk.search_vector)), 0)
FROM knowledge_chunk AS chunk WHERE chunk.id = ANY(%(chunk_ids)s) GROUP BY chunk.collection_id
ON CONFLICT (collection_id) DO UPDATE
SET chunks = counted.chunks + excluded.chunks, lexemes = counted.lexemes + excluded.lexemes
"""
# Found by their primary key, spelled out from the chunks' tsvectors, so no second index is kept
# on the postings. Runs before the chunks themselves are deleted.
_FORGET_DOCUMENT_POSTINGS = """
DELETE FROM knowledge_chunk_term AS term
USING knowledge_chunk AS chunk, unnest(chunk.search_vector) AS word
WHERE chunk.document_id = %(document_id)s
  AND term.collection_id = chunk.collection_id AND term.lexeme = word.lexeme AND term.chunk_id = chunk.id
"""
_FORGET_DOCUMENT_COUNT = """
UPDATE knowledge_collection_chunks AS counted
SET chunks = counted.chunks - gone.chunks, lexemes = counted.lexemes - gone.lexemes
FROM (SELECT collection_id, count(*) AS chunks, coalesce(sum(length(search_vector)), 0) AS lexemes
      FROM knowledge_chunk WHERE document_id = %(document_id)s GROUP BY collection_id) AS gone
WHERE counted.collection_id = gone.collection_id
"""


class PostgresChunkIndex:
    """The tsvector column is computed by PostgreSQL on insert; the postings and counts are
    written here, in the caller's transaction.

    Ranking is BM25's, computed in SQL over the question's scope: ts_rank_cd counts how often and
    how near the words occur but not how rare they are, so "the" ranked with "Normans" (bench/
    retrieval.py: lexical nDCG@10 0.75 with ts_rank_cd, against 0.92 for FTS5's bm25)."""

    # BM25 ranks about as well as FTS5's on its own, so it takes half of a fused score, as there.
    fusion_weight = 0.5

    def index_chunks(self, *, rows: Sequence[tuple[str, str, str, str]]) -> None:
        if not rows:
            return
        chunk_ids = [chunk_id for chunk_id, _, _, _ in rows]
        with connection.cursor() as cursor:
            cursor.execute(_ADD_POSTINGS, {"chunk_ids": chunk_ids})
            cursor.execute(_ADD_COUNTS, {"chunk_ids": chunk_ids})

    def forget_document(self, *, document_id: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(_FORGET_DOCUMENT_POSTINGS, {"document_id": document_id})
            cursor.execute(_FORGET_DOCUMENT_COUNT, {"document_id": document_id})

    def forget_collection(self, *, collection_id: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM knowledge_chunk_term WHERE collection_id = %s", [collection_id])
            cursor.execute("DELETE FROM knowledge_collection_chunks WHERE collection_id = %s", [collection_id])

    def search(self, *, question: str, collection_ids: Sequence[str], limit: int) -> list[SearchHit]:
        terms = search_terms(question)
        if not terms or not collection_ids:
            return []
        params = {"words": " ".join(terms), "scope": list(collection_ids), "limit": limit}
        with connection.cursor() as cursor:
            cursor.execute(_BM25, params)
            return [SearchHit(chunk_id=chunk_id, score=float(score)) for chunk_id, score in cursor.fetchall()]

"""PostgreSQL full-text search: a generated tsvector column on the chunk table with a GIN index,
ranked like BM25 in SQL."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from knowledge.search.base import SearchHit, search_terms

SEARCH_CONFIG = "english"
# The `search_vector` column and its GIN index are created by migration 0002 (only on PostgreSQL).

# BM25's two constants, at the values Robertson and Zaragoza ("The Probabilistic Relevance
# Framework: BM25 and Beyond", 2009) and SQLite's FTS5 use: k1 bounds what repeating a word adds,
# b how much a long chunk is discounted.
K1 = 1.2
B = 0.75

# The chunks of the scope that hold any of the question's words, found through the GIN index; each
# of their lexemes that is one of the question's (unnest of the tsvector: the lexeme and its
# positions, so the positions count how often the chunk uses it) with the chunk's length in
# lexemes. Document frequencies are counted over these same rows: a word's chunks in the scope are
# exactly the matching chunks that hold it. The scope's size is one index-only count.
_BM25 = f"""
WITH query AS (
    SELECT to_tsquery('{SEARCH_CONFIG}', %(query)s) AS tsquery,
           tsvector_to_array(to_tsvector('{SEARCH_CONFIG}', %(words)s)) AS lexemes
),
matched AS (
    SELECT chunk.id, chunk.search_vector, length(chunk.search_vector) AS size
    FROM knowledge_chunk AS chunk, query
    WHERE chunk.search_vector @@ query.tsquery AND chunk.collection_id = ANY(%(scope)s)
),
uses AS (
    SELECT matched.id, matched.size, term.lexeme, cardinality(term.positions) AS often
    FROM matched, query, unnest(matched.search_vector) AS term
    WHERE term.lexeme = ANY(query.lexemes)
),
rarity AS (
    SELECT uses.lexeme,
           ln(1 + ((SELECT count(*) FROM knowledge_chunk WHERE collection_id = ANY(%(scope)s))
                   - count(*) + 0.5) / (count(*) + 0.5)) AS idf
    FROM uses GROUP BY uses.lexeme
),
average AS (SELECT greatest(avg(size), 1) AS size FROM matched)
SELECT uses.id,
       sum(rarity.idf * uses.often * {K1 + 1}
           / (uses.often + {K1} * (1 - {B} + {B} * uses.size / average.size))) AS score
FROM uses JOIN rarity USING (lexeme), average
GROUP BY uses.id
ORDER BY score DESC, uses.id
LIMIT %(limit)s
"""


class PostgresChunkIndex:
    """The column is computed by PostgreSQL on insert, so indexing and forgetting are no-ops.

    Ranking is BM25's, computed in SQL over the question's scope: ts_rank_cd counts how often and
    how near the words occur but not how rare they are, so "the" ranked with "Normans" (bench/
    retrieval.py: lexical nDCG@10 0.75 with ts_rank_cd, against 0.92 for FTS5's bm25)."""

    # BM25 ranks about as well as FTS5's on its own, so it takes half of a fused score, as there.
    fusion_weight = 0.5

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
        params = {"query": " | ".join(terms), "words": " ".join(terms), "scope": list(collection_ids), "limit": limit}
        with connection.cursor() as cursor:
            cursor.execute(_BM25, params)
            return [SearchHit(chunk_id=chunk_id, score=float(score)) for chunk_id, score in cursor.fetchall()]

"""Hybrid retrieval: the lexical index's ranking fused with dense retrieval's (reciprocal rank fusion).

Without an embedding provider, or while it fails, or for chunks it has not embedded yet, retrieval is
the lexical index alone, as before. Fusion works on ranks, not scores: bm25, ts_rank_cd and cosine
live on scales that cannot be added, while a chunk both rankings place high is the best evidence
either has (Cormack, Clarke and Buettcher, SIGIR 2009). bench/retrieval.py measures the choice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from knowledge.embeddings import EmbeddingError, get_embedder
from knowledge.search import get_chunk_index
from knowledge.search.base import SearchHit
from knowledge.search.dense import dense_search

logger = logging.getLogger(__name__)

# How deep each ranking is read before fusing: a passage ranked 30th by words and 2nd by meaning
# must still be seen by the fusion.
CANDIDATES = 40
# The damping constant of reciprocal rank fusion: 60 is the published default; bench/retrieval.py
# found no better value on its set.
RRF_K = 60
# Cosine below which a chunk is not about the question at all (all-MiniLM-L6-v2 puts unrelated
# English text near 0.0-0.15): such chunks never enter the answer through dense retrieval alone.
MIN_SIMILARITY = 0.2


def reciprocal_rank_fusion(rankings: Sequence[Sequence[SearchHit]], *, limit: int, k: int = RRF_K) -> list[SearchHit]:
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, start=1):
            fused[hit.chunk_id] = fused.get(hit.chunk_id, 0.0) + 1.0 / (k + rank)
    best = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [SearchHit(chunk_id=chunk_id, score=score) for chunk_id, score in best]


def dense_ranking(*, question: str, collection_ids: Sequence[str], limit: int) -> list[SearchHit] | None:
    """The dense ranking, or None where there is none (no provider, or it failed: words alone then)."""
    embedder = get_embedder()
    if embedder is None:
        return None
    try:
        vector = embedder.embed([question])[0]
    except EmbeddingError as exc:
        logger.warning("Searching by words only: the question could not be embedded: %s", exc)
        return None
    return dense_search(
        vector=vector, model=embedder.model, collection_ids=collection_ids, limit=limit, min_similarity=MIN_SIMILARITY
    )


def hybrid_search(*, question: str, collection_ids: Sequence[str], limit: int) -> list[SearchHit]:
    """Best first; scores are fusion scores when a dense ranking took part, the index's otherwise."""
    depth = max(limit, CANDIDATES)
    lexical = get_chunk_index().search(question=question, collection_ids=collection_ids, limit=depth)
    dense = dense_ranking(question=question, collection_ids=collection_ids, limit=depth)
    if dense is None:
        return lexical[:limit]
    return reciprocal_rank_fusion([lexical, dense], limit=limit)

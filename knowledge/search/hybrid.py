"""Hybrid retrieval: the lexical index's ranking fused with dense retrieval's.

Without an embedding provider, or while it fails, or for chunks it has not embedded yet, retrieval is
the lexical index alone, as before. Fusion is a convex combination of the two scores, each scaled
to 0..1 over the candidates of its own ranking (min-max), the lexical one weighted by how well
that index ranks (`fusion_weight`: half for both, FTS5's bm25 and the BM25 of the PostgreSQL
index): BM25 and cosine live on scales that cannot be added as they are. Bruch, Gai and Ingber ("An
Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 2023) found it ahead of reciprocal
rank fusion, and so did bench/retrieval.py on its set (SQLite: nDCG@10 0.947 against 0.927 for
RRF and 0.921 for lexical search alone; PostgreSQL: 0.945, 0.927 and 0.920).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np

from knowledge.embeddings import EmbeddingError, get_embedder, one_blas_thread
from knowledge.search import get_chunk_index
from knowledge.search.base import SearchHit
from knowledge.search.dense import Block, dense_search, similarities, vector_cache

logger = logging.getLogger(__name__)

# How deep each ranking is read before fusing: a passage ranked 30th by words and 2nd by meaning
# must still be seen by the fusion.
CANDIDATES = 40
# Cosine below which a chunk is not about the question at all (all-MiniLM-L6-v2 puts unrelated
# English text near 0.0-0.15): such chunks never enter the answer through dense retrieval alone.
MIN_SIMILARITY = 0.2
# A chunk either ranking let in stays only if its cosine is at least this share of the best one's:
# a question's words find passages that share a word and nothing else (the demo's "Who can send
# messages in a shared chat?" met the sandboxes page at 0.10 beside the sharing page at 0.63), and
# an answer should not quote them. bench/retrieval.py measures it: at 0.65 answers carry 1.97
# markers on average on SQLite (2.01 at 0.6, 2.23 by words alone) and [1] holds the answer as often.
RELATIVE_SIMILARITY = 0.65
# Questions being embedded at once per process: more than a worker has request threads
# (WORKSPACE_REQUEST_THREADS and WORKSPACE_LONG_WORK_THREADS, 8 each by default), so a question
# never waits behind another's slow provider;
# threads start only when needed.
_embedding_threads = ThreadPoolExecutor(max_workers=32, thread_name_prefix="question-embedding")


def _scaled(hits: Sequence[SearchHit]) -> dict[str, float]:
    """Scores mapped onto 0..1 over this ranking's candidates (all 1 when they are equal)."""
    if not hits:
        return {}
    high, low = max(hit.score for hit in hits), min(hit.score for hit in hits)
    return {hit.chunk_id: (hit.score - low) / (high - low) if high > low else 1.0 for hit in hits}


def convex_combination(
    lexical: Sequence[SearchHit], dense: Sequence[SearchHit], *, limit: int, weight: float
) -> list[SearchHit]:
    """Best first by weight x lexical + (1 - weight) x dense, each scaled; a chunk one ranking did
    not return scores 0 there."""
    words, meaning = _scaled(lexical), _scaled(dense)
    fused = {
        chunk_id: weight * words.get(chunk_id, 0.0) + (1 - weight) * meaning.get(chunk_id, 0.0)
        for chunk_id in {**words, **meaning}
    }
    best = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [SearchHit(chunk_id=chunk_id, score=score) for chunk_id, score in best]


def near_the_question(
    hits: Sequence[SearchHit], *, vector: np.ndarray, blocks: Sequence[Block], keep_far: bool = False
) -> list[SearchHit]:
    """`hits` without those much further from the question in meaning than the nearest one (all of
    them with `keep_far`), each carrying its cosine; chunks without a vector yet (pending) are
    judged by their words alone and stay."""
    cosine = similarities(vector=vector, blocks=blocks, chunk_ids=[hit.chunk_id for hit in hits])
    if not cosine:
        return list(hits)
    floor = -np.inf if keep_far else RELATIVE_SIMILARITY * max(cosine.values())
    return [
        replace(hit, similarity=cosine.get(hit.chunk_id)) for hit in hits if cosine.get(hit.chunk_id, floor) >= floor
    ]


def hybrid_search(
    *, question: str, collection_ids: Sequence[str], limit: int, keep_far: bool = False
) -> list[SearchHit]:
    """Best first; scores are fusion scores when a dense ranking took part, the index's otherwise.
    `keep_far` keeps the chunks that share the question's words but are far from it in meaning: a
    reranker reading them next judges both better than a cosine does."""
    depth = max(limit, CANDIDATES)
    index = get_chunk_index()
    embedder = get_embedder()
    # The question is embedded on another thread while the database ranks by words: the model's
    # forward pass (or the provider's round trip) and the lexical query overlap instead of adding up.
    embedding = _embedding_threads.submit(embedder.embed, [question]) if embedder is not None else None
    lexical = index.search(question=question, collection_ids=collection_ids, limit=depth)
    if embedding is None:
        return lexical[:limit]
    try:
        vector = embedding.result()[0]
    except EmbeddingError as exc:
        logger.warning("Searching by words only: the question could not be embedded: %s", exc)
        return lexical[:limit]
    except Exception:
        # Whatever else breaks on the embedding thread (a model's runtime, a client library) costs
        # the question its meaning, not its answer: the words are ranked already. Logged whole.
        logger.exception("Searching by words only: embedding the question failed unexpectedly")
        return lexical[:limit]
    blocks = vector_cache.blocks(model=embedder.model, collection_ids=collection_ids)
    with one_blas_thread():
        dense = dense_search(
            vector=vector, blocks=blocks, limit=depth, min_similarity=MIN_SIMILARITY, model=embedder.model
        )
    fused = convex_combination(lexical, dense, limit=depth, weight=index.fusion_weight)
    return near_the_question(fused, vector=vector, blocks=blocks, keep_far=keep_far)[:limit]

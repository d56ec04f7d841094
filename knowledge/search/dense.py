"""Dense retrieval: cosine similarity between the question's vector and the stored chunk vectors of
the question's collections, computed with NumPy over a per-process cache of each collection's
matrix (neither database needs an extension; PostgreSQL's pgvector is not assumed).

The cache is checked on every search with one indexed aggregate per question (each collection's
row count and highest id under the model): ids only grow, so rows added since are appended, and a
collection that lost rows (a re-upload, a delete) is read again whole.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django.db.models import Count, Max

from knowledge.models import ChunkEmbedding
from knowledge.search.base import SearchHit


@dataclass(frozen=True)
class _Block:
    """One collection's vectors under one model, as of (`count`, `last_id`)."""

    chunk_ids: np.ndarray  # of str, so a search picks its best ids in one indexing step
    matrix: np.ndarray
    count: int
    last_id: int


_EMPTY = _Block(chunk_ids=np.array([], dtype=object), matrix=np.zeros((0, 0), dtype=np.float32), count=0, last_id=0)


def vector_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def _matrix(rows: Sequence[bytes]) -> np.ndarray:
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    flat = np.frombuffer(b"".join(bytes(row) for row in rows), dtype="<f4")
    return flat.reshape(len(rows), -1).astype(np.float32, copy=False)


class VectorCache:
    """Each server process keeps the vectors of the collections it has searched: chunks x dims x 4
    bytes (1.5 KB a chunk at 384 dimensions)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blocks: dict[tuple[str, str], _Block] = {}

    def clear(self) -> None:
        with self._lock:
            self._blocks.clear()

    def blocks(self, *, model: str, collection_ids: Sequence[str]) -> list[_Block]:
        stored = {
            row["collection_id"]: (row["count"], row["last_id"])
            for row in ChunkEmbedding.objects.filter(collection_id__in=list(collection_ids), model=model)
            .values("collection_id")
            .annotate(count=Count("id"), last_id=Max("id"))
            .order_by()
        }
        found = []
        for collection_id in dict.fromkeys(collection_ids):
            count, last_id = stored.get(collection_id, (0, 0))
            key = (model, collection_id)
            with self._lock:
                block = self._blocks.get(key, _EMPTY)
            if (block.count, block.last_id) != (count, last_id):
                block = self._refreshed(block, model=model, collection_id=collection_id, count=count, last_id=last_id)
                with self._lock:
                    self._blocks[key] = block
            if block.count:
                found.append(block)
        return found

    def _refreshed(self, block: _Block, *, model: str, collection_id: str, count: int, last_id: int) -> _Block:
        rows = ChunkEmbedding.objects.filter(collection_id=collection_id, model=model, id__lte=last_id)
        if block.count:
            added = list(rows.filter(id__gt=block.last_id).order_by("id").values_list("chunk_id", "vector"))
            if block.count + len(added) == count:
                # Only appended since: the cached part is still exact.
                return _block(added, last_id=last_id, after=block)
        return _block(list(rows.order_by("id").values_list("chunk_id", "vector")), last_id=last_id)


def _block(rows: list[tuple[str, bytes]], *, last_id: int, after: _Block = _EMPTY) -> _Block:
    ids = np.array([chunk_id for chunk_id, _ in rows], dtype=object)
    matrix = _matrix([vector for _, vector in rows])
    if after.count:
        ids, matrix = np.concatenate([after.chunk_ids, ids]), np.concatenate([after.matrix, matrix])
    return _Block(chunk_ids=ids, matrix=matrix, count=len(ids), last_id=last_id)


vector_cache = VectorCache()


def dense_search(
    *, vector: np.ndarray, model: str, collection_ids: Sequence[str], limit: int, min_similarity: float
) -> list[SearchHit]:
    """Best first, at most `limit`, none below `min_similarity` (cosine: the vectors are unit length)."""
    if not collection_ids or limit <= 0:
        return []
    query = np.asarray(vector, dtype=np.float32)
    best_scores, best_ids = [], []
    for block in vector_cache.blocks(model=model, collection_ids=collection_ids):
        if block.matrix.shape[1] != query.shape[0]:
            continue  # vectors of another width cannot be compared (a misconfigured model name)
        scores = block.matrix @ query
        keep = min(limit, len(scores))
        top = np.argpartition(-scores, keep - 1)[:keep]
        best_scores.append(scores[top])
        best_ids.append(block.chunk_ids[top])
    if not best_scores:
        return []
    scores, chunk_ids = np.concatenate(best_scores), np.concatenate(best_ids)
    hits = sorted(zip((-scores).tolist(), chunk_ids.tolist(), strict=True))[:limit]
    return [SearchHit(chunk_id=chunk_id, score=-negated) for negated, chunk_id in hits if -negated >= min_similarity]

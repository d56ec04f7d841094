"""Dense retrieval: cosine similarity between the question's vector and the stored chunk vectors of
the question's collections, computed with NumPy over a per-process cache of each collection's
matrix (neither database needs an extension; PostgreSQL's pgvector is not assumed).

The cache is checked on every search with one statement of index lookups per question (each
collection's highest vector id under the model, and its count of deletes in CollectionVectors):
writers of a collection's vectors draw ids one at a time and in commit order, so rows above the
highest id read are the ones added since and are appended; a collection whose vectors were
deleted (a re-upload, a document's delete) is read again whole.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from django.conf import settings
from django.db.models import OuterRef, Subquery

from knowledge.models import ChunkEmbedding, Collection, CollectionVectors
from knowledge.search.base import SearchHit
from knowledge.search.ivf import ivf_indexes, ivf_search


@dataclass(frozen=True)
class Block:
    """One collection's vectors under one model, as of (`count`, `last_id`)."""

    chunk_ids: np.ndarray  # of str, so a search picks its best ids in one indexing step
    matrix: np.ndarray
    drops: int
    last_id: int
    row_of: dict[str, int]
    collection_id: str = ""

    @property
    def count(self) -> int:
        return len(self.chunk_ids)


_EMPTY = Block(
    chunk_ids=np.array([], dtype=object), matrix=np.zeros((0, 0), dtype=np.float32), drops=0, last_id=0, row_of={}
)


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
        self._blocks: dict[tuple[str, str], Block] = {}

    def clear(self) -> None:
        with self._lock:
            self._blocks.clear()
        ivf_indexes.clear()

    def blocks(self, *, model: str, collection_ids: Sequence[str]) -> list[Block]:
        newest = ChunkEmbedding.objects.filter(collection_id=OuterRef("pk"), model=model).order_by("-id")
        drops = CollectionVectors.objects.filter(pk=OuterRef("pk"))
        stored = {
            collection_id: (drops or 0, last_id or 0)
            for collection_id, last_id, drops in Collection.objects.filter(pk__in=list(collection_ids))
            .annotate(last_id=Subquery(newest.values("id")[:1]), drops=Subquery(drops.values("drops")[:1]))
            .values_list("pk", "last_id", "drops")
            .order_by()
        }
        found = []
        for collection_id in dict.fromkeys(collection_ids):
            drops, last_id = stored.get(collection_id, (0, 0))
            key = (model, collection_id)
            with self._lock:
                block = self._blocks.get(key, _EMPTY)
            if (block.drops, block.last_id) != (drops, last_id):
                block = replace(
                    self._refreshed(block, model=model, collection_id=collection_id, drops=drops, last_id=last_id),
                    collection_id=collection_id,
                )
                with self._lock:
                    self._blocks[key] = block
            if block.count:
                found.append(block)
        return found

    def _refreshed(self, block: Block, *, model: str, collection_id: str, drops: int, last_id: int) -> Block:
        rows = ChunkEmbedding.objects.filter(collection_id=collection_id, model=model, id__lte=last_id)
        if block.count and block.drops == drops:
            # Nothing deleted since: the cached part is exact, and the rows after it are the new ones.
            added = rows.filter(id__gt=block.last_id).order_by("id").values_list("chunk_id", "vector")
            return _block(list(added), drops=drops, last_id=last_id, after=block)
        return _block(list(rows.order_by("id").values_list("chunk_id", "vector")), drops=drops, last_id=last_id)


def _block(rows: list[tuple[str, bytes]], *, drops: int, last_id: int, after: Block = _EMPTY) -> Block:
    if not rows:
        return replace(after, drops=drops, last_id=last_id)
    ids = np.array([chunk_id for chunk_id, _ in rows], dtype=object)
    matrix = _matrix([vector for _, vector in rows])
    if after.count:
        ids, matrix = np.concatenate([after.chunk_ids, ids]), np.concatenate([after.matrix, matrix])
    row_of = {**after.row_of, **{chunk_id: after.count + row for row, (chunk_id, _) in enumerate(rows)}}
    return Block(chunk_ids=ids, matrix=matrix, drops=drops, last_id=last_id, row_of=row_of)


vector_cache = VectorCache()


def dense_search(
    *,
    vector: np.ndarray,
    blocks: Sequence[Block],
    limit: int,
    min_similarity: float,
    model: str = "",
    ivf_min_vectors: int | None = None,
) -> list[SearchHit]:
    """Best first among `blocks` (`vector_cache.blocks`, the question's scope), at most `limit`, none
    below `min_similarity` (cosine: the vectors are unit length). A scope of at least
    `ivf_min_vectors` vectors (`WORKSPACE_EMBEDDINGS_IVF_MIN_VECTORS` unless given) is searched
    through its IVF index (knowledge/search/ivf.py), a smaller one exactly."""
    if limit <= 0:
        return []
    threshold = settings.WORKSPACE_EMBEDDINGS_IVF_MIN_VECTORS if ivf_min_vectors is None else ivf_min_vectors
    query = np.asarray(vector, dtype=np.float32)
    comparable = [block for block in blocks if block.matrix.shape[1] == query.shape[0]]
    if threshold > 0 and sum(block.count for block in comparable) >= threshold:
        return ivf_search(vector=query, blocks=comparable, model=model, limit=limit, min_similarity=min_similarity)
    return exact_search(vector=query, blocks=comparable, limit=limit, min_similarity=min_similarity)


def exact_search(*, vector: np.ndarray, blocks: Sequence[Block], limit: int, min_similarity: float) -> list[SearchHit]:
    """`dense_search` comparing the question with every vector of `blocks`."""
    if limit <= 0:
        return []
    query = np.asarray(vector, dtype=np.float32)
    best_scores, best_ids = [], []
    for block in blocks:
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


def similarities(*, vector: np.ndarray, blocks: Sequence[Block], chunk_ids: Sequence[str]) -> dict[str, float]:
    """The cosine of each of `chunk_ids` that has a vector in `blocks` (pending chunks are left out)."""
    query = np.asarray(vector, dtype=np.float32)
    found: dict[str, float] = {}
    for block in blocks:
        rows = [(chunk_id, block.row_of[chunk_id]) for chunk_id in chunk_ids if chunk_id in block.row_of]
        if rows and block.matrix.shape[1] == query.shape[0]:
            scores = block.matrix[[row for _, row in rows]] @ query
            found.update(zip([chunk_id for chunk_id, _ in rows], scores.tolist(), strict=True))
    return found

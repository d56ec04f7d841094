"""An inverted-file (IVF) index over the vectors of one search scope, for scopes too large to compare
every vector with the question in the time a question has.

The vectors are clustered with spherical k-means (about sqrt(n) lists, trained on a sample); a
question is compared with the centroids, then only with the vectors of its nearest lists. At 10^5
vectors that is some 20% of them (bench/hybrid_search.py). Below
`WORKSPACE_EMBEDDINGS_IVF_MIN_VECTORS` vectors search stays exact: there the whole comparison costs
less than the index would save, and exact search is always right.

An index belongs to one scope (the set of collections a question searches) and holds only their
vectors, so it can never return a chunk of a collection outside the scope. It is kept per process
beside the vector cache and follows it: each search hands it the scope's current blocks, and a
scope whose vectors changed since the index was built is indexed again before it is searched (rows
only added: they join their nearest lists; rows deleted or replaced: the rows it had keep their
lists and new ones join their nearest; a scope that has halved or doubled since training: k-means
again).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from knowledge.search.base import SearchHit

if TYPE_CHECKING:
    from knowledge.search.dense import Block

# Vectors each list holds on average when trained: 100 lists at 10^5 vectors. More lists would read
# fewer vectors per question, but placing every vector costs vectors x lists products, and a
# scope whose vectors were all replaced pays that on its next question (0.3 s at 10^5 here).
VECTORS_PER_LIST = 1000
# Training reads at most this many vectors per list (a sample: k-means on all 10^5 adds little).
SAMPLE_PER_LIST = 32
TRAINING_ROUNDS = 6
# Lists read per question: a fifth of them, at least 8 (recall against exact search in
# bench/retrieval.py with the threshold lowered).
PROBE_SHARE = 0.2
MIN_PROBES = 8
# Scopes whose index a process keeps (a chat's scope is asked again and again; each index holds a
# sorted copy of its vectors, 1.5 KB a chunk at 384 dimensions).
KEPT_SCOPES = 8
# Rows assigned per multiplication (bounds the rows x lists score matrix).
ASSIGN_BATCH = 8192

# (collection id, drops, last id, rows) of each block an index was built from.
Source = tuple[str, int, int, int]


@dataclass(frozen=True)
class IvfIndex:
    centroids: np.ndarray  # lists x dims, unit rows
    matrix: np.ndarray  # the scope's vectors, sorted by list
    chunk_ids: np.ndarray  # of str, in the order of `matrix`
    bounds: np.ndarray  # list l holds rows bounds[l]:bounds[l + 1]
    sources: tuple[Source, ...]
    trained_on: int

    @property
    def lists(self) -> int:
        return len(self.centroids)

    def probes(self) -> int:
        return min(self.lists, max(MIN_PROBES, math.ceil(self.lists * PROBE_SHARE)))

    def search(self, *, vector: np.ndarray, limit: int) -> list[tuple[float, str]]:
        """(cosine, chunk id) of the best `limit` vectors in the probed lists, best first."""
        query = np.asarray(vector, dtype=np.float32)
        near = np.argpartition(-(self.centroids @ query), self.probes() - 1)[: self.probes()]
        scores, rows = [], []
        for lst in near.tolist():
            start, end = int(self.bounds[lst]), int(self.bounds[lst + 1])
            if end > start:
                scores.append(self.matrix[start:end] @ query)
                rows.append(np.arange(start, end))
        if not scores:
            return []
        all_scores, all_rows = np.concatenate(scores), np.concatenate(rows)
        keep = min(limit, len(all_scores))
        top = np.argpartition(-all_scores, keep - 1)[:keep]
        best = sorted(zip((-all_scores[top]).tolist(), self.chunk_ids[all_rows[top]].tolist(), strict=True))
        return [(-negated, chunk_id) for negated, chunk_id in best]


def _sources(blocks: Sequence[Block]) -> tuple[Source, ...]:
    return tuple(sorted((block.collection_id, block.drops, block.last_id, block.count) for block in blocks))


def _assign(matrix: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    labels = np.empty(len(matrix), dtype=np.int64)
    for start in range(0, len(matrix), ASSIGN_BATCH):
        labels[start : start + ASSIGN_BATCH] = np.argmax(matrix[start : start + ASSIGN_BATCH] @ centroids.T, axis=1)
    return labels


def train(matrix: np.ndarray) -> np.ndarray:
    """Spherical k-means centroids (unit rows) of `matrix`'s rows, from a fixed-seed sample."""
    lists = max(1, round(len(matrix) / VECTORS_PER_LIST))
    random = np.random.default_rng(26)
    sample_size = min(len(matrix), lists * SAMPLE_PER_LIST)
    sample = matrix[np.sort(random.choice(len(matrix), size=sample_size, replace=False))]
    centroids = sample[random.choice(sample_size, size=lists, replace=False)].copy()
    for _ in range(TRAINING_ROUNDS):
        labels = _assign(sample, centroids)
        sums = np.zeros_like(centroids)
        np.add.at(sums, labels, sample)
        empty = np.bincount(labels, minlength=lists) == 0
        # A list nothing joined starts again from a random vector of the sample.
        sums[empty] = sample[random.choice(sample_size, size=int(empty.sum()))]
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = (sums / np.where(norms == 0, 1, norms)).astype(np.float32)
    return centroids


def _sorted(
    matrix: np.ndarray, chunk_ids: np.ndarray, labels: np.ndarray, lists: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.argsort(labels, kind="stable")
    bounds = np.zeros(lists + 1, dtype=np.int64)
    np.cumsum(np.bincount(labels, minlength=lists), out=bounds[1:])
    return matrix[order], chunk_ids[order], bounds


def build(blocks: Sequence[Block], *, previous: IvfIndex | None = None) -> IvfIndex:
    """The index of `blocks`' vectors; `previous` (the same scope's older index) saves training."""
    sources = _sources(blocks)
    matrix = np.concatenate([block.matrix for block in blocks])
    chunk_ids = np.concatenate([block.chunk_ids for block in blocks])
    reuse = previous is not None and previous.trained_on / 2 <= len(matrix) <= previous.trained_on * 2
    if not reuse or previous is None:
        centroids = train(matrix)
        trained_on = len(matrix)
        labels = _assign(matrix, centroids)
    else:
        centroids, trained_on = previous.centroids, previous.trained_on
        labels = _labels_kept(chunk_ids, matrix, previous)
    sorted_matrix, sorted_ids, bounds = _sorted(matrix, chunk_ids, labels, len(centroids))
    return IvfIndex(centroids, sorted_matrix, sorted_ids, bounds, sources, trained_on)


def _labels_kept(chunk_ids: np.ndarray, matrix: np.ndarray, previous: IvfIndex) -> np.ndarray:
    """Each row's list under `previous`'s centroids: a chunk it already placed stays in its list
    (a delete costs no new products), the others are placed now."""
    placed = dict(zip(previous.chunk_ids.tolist(), _list_of_rows(previous).tolist(), strict=True))
    labels = np.fromiter((placed.get(chunk_id, -1) for chunk_id in chunk_ids.tolist()), dtype=np.int64)
    unplaced = np.flatnonzero(labels < 0)
    if len(unplaced):
        labels[unplaced] = _assign(matrix[unplaced], previous.centroids)
    return labels


def _list_of_rows(index: IvfIndex) -> np.ndarray:
    return np.repeat(np.arange(index.lists), np.diff(index.bounds))


def _appended(blocks: Sequence[Block], index: IvfIndex) -> IvfIndex | None:
    """`index` with the rows added since it was built, when rows were only added (else None)."""
    before = {source[0]: source for source in index.sources}
    if set(before) != {block.collection_id for block in blocks}:
        return None
    new_rows, new_ids = [], []
    for block in blocks:
        _, drops, _, count = before[block.collection_id]
        if block.drops != drops or block.count < count:
            return None
        new_rows.append(block.matrix[count:])
        new_ids.append(block.chunk_ids[count:])
    added = np.concatenate(new_rows)
    total = len(index.matrix) + len(added)
    if total > index.trained_on * 2:
        return None
    labels = np.concatenate([np.repeat(np.arange(index.lists), np.diff(index.bounds)), _assign(added, index.centroids)])
    matrix, chunk_ids, bounds = _sorted(
        np.concatenate([index.matrix, added]), np.concatenate([index.chunk_ids, *new_ids]), labels, index.lists
    )
    return IvfIndex(index.centroids, matrix, chunk_ids, bounds, _sources(blocks), index.trained_on)


class IvfIndexes:
    """The indexes of the scopes a process searched most recently."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._indexes: OrderedDict[tuple[str, tuple[str, ...]], IvfIndex] = OrderedDict()

    def clear(self) -> None:
        with self._lock:
            self._indexes.clear()

    def current(self, *, model: str, blocks: Sequence[Block]) -> IvfIndex:
        """The index of exactly `blocks` as they are now, built or brought up to date first."""
        key = (model, tuple(sorted(block.collection_id for block in blocks)))
        with self._lock:
            index = self._indexes.get(key)
            if index is not None:
                self._indexes.move_to_end(key)
        if index is None or index.sources != _sources(blocks):
            # Built outside the lock: another scope's questions do not wait for this one's k-means.
            updated = _appended(blocks, index) if index is not None else None
            index = updated or build(blocks, previous=index)
            with self._lock:
                self._indexes[key] = index
                self._indexes.move_to_end(key)
                while len(self._indexes) > KEPT_SCOPES:
                    self._indexes.popitem(last=False)
        return index


ivf_indexes = IvfIndexes()


def ivf_search(
    *, vector: np.ndarray, blocks: Sequence[Block], model: str, limit: int, min_similarity: float
) -> list[SearchHit]:
    hits = ivf_indexes.current(model=model, blocks=blocks).search(vector=vector, limit=limit)
    return [SearchHit(chunk_id=chunk_id, score=score) for score, chunk_id in hits if score >= min_similarity]

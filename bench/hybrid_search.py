"""What a question's retrieval costs as the library grows: lexical search, dense search and their
fusion, over one collection of 1,000 chunks (a chat's usual scope) and over the whole library of
`size` chunks in 100-chunk documents, plus the whole retrieval of a chat question with the packaged
all-MiniLM-L6-v2 embedding it (`retrieve_passages`: what the server spends before the answerer),
and that retrieval again with the packaged cross-encoder reranking its first 10 passages where it
is installed (README "Reranking"; SQuAD's paragraphs are three times as long as these chunks:
bench/retrieval.py --distractors times the reranker on real text). Chunks are 40 words drawn from a
5,000-word Zipf vocabulary; their vectors are random unit vectors of the model's 384 dimensions,
stored as ingest stores them (the cost does not depend on what the vectors mean). Dense search over
the whole library goes through the IVF index from WORKSPACE_EMBEDDINGS_IVF_MIN_VECTORS (20,000)
vectors on, as the service does; "every vector" is exact search beside it, and the cold-cache
figure includes building the index. The CPU time of this process per figure is printed after the
table (on a shared machine the wall clock counts other processes' turns too). It asserts nothing
about time.

.venv/bin/python bench/hybrid_search.py [--sizes 1000,10000,100000] [--database-url postgres://...]
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Figure, measure, parse_args, print_table, setup_django
from collab.actor import Actor

# CPU seconds this process spent per figure: on a shared machine the wall-clock figures count the
# time other processes held the cores, this one only ours (PostgreSQL's own work is in "db ms").
_cpu_ms: dict[tuple[str, int], float] = {}


def measured(label: str, size: int, repeat: int, action: Callable[[], object]) -> Figure:
    action()  # the warm-up (a cold cache's load, an index's build) is not what a question costs
    began = time.process_time()
    figure = measure(label, size, repeat, action)
    _cpu_ms[(label, size)] = (time.process_time() - began) / (repeat + 1) * 1000
    return figure


CHUNKS_PER_DOCUMENT = 100
DOCUMENTS_PER_COLLECTION = 10
VOCABULARY = 5000
WORDS_PER_CHUNK = 40
DIMENSIONS = 384
# Two words of the vocabulary, each in about 1% of the chunks, and words no chunk has.
QUESTION = "How long are backups of the w850 w2400 database kept?"
USER = "alice"
_random = np.random.default_rng(26)
_ranks = np.arange(1, VOCABULARY + 1)
_zipf = (1 / _ranks) / (1 / _ranks).sum()


def _texts(count: int) -> list[str]:
    words = _random.choice(VOCABULARY, size=(count, WORDS_PER_CHUNK), p=_zipf)
    return [" ".join(f"w{word}" for word in row) + "." for row in words]


def _unit_vectors(count: int) -> np.ndarray:
    vectors = _random.standard_normal((count, DIMENSIONS)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def add_document(collection_id: str, filename: str, model: str) -> None:
    from knowledge.models import Chunk, ChunkEmbedding, Document
    from knowledge.search import get_chunk_index
    from knowledge.search.dense import vector_bytes

    document = Document(collection_id=collection_id, filename=filename, status=Document.Status.READY, size=1)
    document.stamp_created(USER)
    document.save()
    chunks = [
        Chunk(document=document, collection_id=collection_id, ordinal=ordinal, text=text)
        for ordinal, text in enumerate(_texts(CHUNKS_PER_DOCUMENT))
    ]
    Chunk.objects.bulk_create(chunks)
    get_chunk_index().index_chunks(rows=[(c.id, document.id, collection_id, c.text) for c in chunks])
    ChunkEmbedding.objects.bulk_create(
        ChunkEmbedding(
            chunk_id=chunk.id,
            document_id=document.id,
            collection_id=collection_id,
            model=model,
            vector=vector_bytes(vector),
        )
        for chunk, vector in zip(chunks, _unit_vectors(len(chunks)), strict=True)
    )


def grow_library(total_chunks: int, already: int, model: str, collections: list[str]) -> None:
    from django.db import transaction

    from knowledge import services

    chunk = already
    while chunk < total_chunks:
        collection = services.collection_create(actor=Actor(USER), name=f"Library {chunk}")
        collections.append(collection.id)
        with transaction.atomic():
            for number in range(DOCUMENTS_PER_COLLECTION):
                if chunk >= total_chunks:
                    break
                add_document(collection.id, f"doc-{number}.md", model)
                chunk += CHUNKS_PER_DOCUMENT


def main() -> None:
    args = parse_args(__doc__ or "", "1000,10000,100000")
    args.repeat = min(args.repeat, 50)
    from knowledge.embeddings.local import packaged_model_path
    from knowledge.rerank import packaged_reranker_path

    os.environ["WORKSPACE_EMBEDDINGS_PATH"] = packaged_model_path()
    os.environ["WORKSPACE_RERANK_PATH"] = ""
    rerank_path = packaged_reranker_path()
    vendor = setup_django(args.database_url, "hybrid_search")
    from django.conf import settings
    from django.db import connection

    from knowledge.answers import retrieve_passages
    from knowledge.embeddings import get_embedder, one_blas_thread
    from knowledge.search import get_chunk_index
    from knowledge.search.dense import dense_search, vector_cache
    from knowledge.search.hybrid import CANDIDATES, MIN_SIMILARITY, convex_combination

    embedder = get_embedder()
    question_vector = embedder.embed([QUESTION])[0]
    collections: list[str] = []

    def lexical(scope: list[str]) -> list:
        return get_chunk_index().search(question=QUESTION, collection_ids=scope, limit=CANDIDATES)

    def dense(scope: list[str], ivf_min_vectors: int | None = None) -> list:
        blocks = vector_cache.blocks(model=embedder.model, collection_ids=scope)
        with one_blas_thread():  # as the service searches
            return dense_search(
                vector=question_vector,
                blocks=blocks,
                limit=CANDIDATES,
                min_similarity=-1,
                ivf_min_vectors=ivf_min_vectors,
            )

    def dense_exact(scope: list[str]) -> list:
        return dense(scope, ivf_min_vectors=0)

    def hybrid(scope: list[str]) -> list:
        return convex_combination(lexical(scope), dense(scope), limit=8, weight=get_chunk_index().fusion_weight)

    figures: list[Figure] = [
        measured("embed a question (local model)", 0, args.repeat, lambda: embedder.embed([QUESTION]))
    ]
    filled = 0
    for size in sorted(args.sizes):
        grow_library(size, filled, embedder.model, collections)
        filled = size
        with connection.cursor() as cursor:
            # PostgreSQL: as autovacuum leaves a table after inserts (its visibility map set, so the
            # BM25 query counts a scope's chunks from the index alone), not as a bulk load leaves it.
            cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
        one = collections[:1]
        everything = list(collections)
        for label, scope in (("1,000-chunk collection", one), ("whole library", everything)):
            figures.append(measured(f"lexical, {label}", size, args.repeat, lambda scope=scope: lexical(scope)))
            figures.append(measured(f"dense, {label}", size, args.repeat, lambda scope=scope: dense(scope)))
            figures.append(measured(f"hybrid, {label}", size, args.repeat, lambda scope=scope: hybrid(scope)))

        figures.append(
            measured(
                "dense, whole library, every vector",
                size,
                args.repeat,
                lambda everything=everything: dense_exact(everything),
            )
        )

        def cold(everything: list[str] = everything) -> None:
            vector_cache.clear()
            dense(everything)

        figures.append(measured("dense, whole library, cold cache", size, min(args.repeat, 3), cold))
        figures.append(
            measured(
                "question, whole library, every step",
                size,
                args.repeat,
                lambda everything=everything: retrieve_passages(question=QUESTION, collection_ids=everything),
            )
        )
        if rerank_path:
            settings.WORKSPACE_RERANK_PATH = rerank_path
            figures.append(
                measured(
                    "question, whole library, reranked",
                    size,
                    min(args.repeat, 10),
                    lambda everything=everything: retrieve_passages(question=QUESTION, collection_ids=everything),
                )
            )
            settings.WORKSPACE_RERANK_PATH = ""
    print(f"min similarity {MIN_SIMILARITY} (not applied above: random vectors), candidates {CANDIDATES}")
    print_table(vendor, figures)
    print(f"\nCPU of this process per figure (load average {os.getloadavg()[0]:.1f} at the end):")
    for figure in figures:
        print(f"  {figure.label:<38} {figure.size:>9,}  {_cpu_ms[(figure.label, figure.size)]:9.3f} cpu ms")


if __name__ == "__main__":
    main()

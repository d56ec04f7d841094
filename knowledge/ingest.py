"""Ingest: extract, chunk and index an uploaded document, and record how it ended.

Runs in `manage.py worker` as the `ingest_document_task` task (knowledge/tasks.py); the upload
service enqueues it in its own transaction. Each step is guarded by the document's
`content_version`, so an ingest of bytes a newer upload replaced changes nothing.

Where an embedding provider is configured, the chunks are embedded once they are stored and
searchable by words (the document is `ready` then): in turns of their own tasks, outside any
transaction (a provider may take seconds), so that one person's large upload takes turns with
everyone else's work; a provider that fails leaves them pending for the worker's backfill
(`embeddings_backfill`), never the document failed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, QuerySet

from knowledge.chunking import ChunkText
from knowledge.embeddings import Embedder, EmbeddingError, embed_in_batches, get_embedder
from knowledge.extraction import ExtractionLimits, extract_chunks
from knowledge.formats import ExtractionError, document_format
from knowledge.models import Chunk, ChunkEmbedding, CollectionVectors, Document
from knowledge.search import get_chunk_index
from knowledge.search.dense import vector_bytes

logger = logging.getLogger(__name__)

# Chunks one backfill run embeds: bounds a worker's turn (a local model embeds a few a second).
BACKFILL_BATCH = 64


def drop_chunks(document_id: str) -> None:
    get_chunk_index().forget_document(document_id=document_id)
    dropped, _ = ChunkEmbedding.objects.filter(document_id=document_id).delete()
    if dropped:
        collection_id = Document.objects.filter(pk=document_id).values_list("collection_id", flat=True).first()
        if collection_id is not None:
            _vectors_dropped(collection_id)
    Chunk.objects.filter(document_id=document_id).delete()


def drop_collection_chunks(collection_id: str) -> None:
    get_chunk_index().forget_collection(collection_id=collection_id)
    if ChunkEmbedding.objects.filter(collection_id=collection_id).delete()[0]:
        # Gone with the collection: a search process's cache of it no longer matches (no row reads
        # as no drops and no vectors) and is emptied.
        CollectionVectors.objects.filter(pk=collection_id).delete()
    Chunk.objects.filter(collection_id=collection_id).delete()


def _vectors_dropped(collection_id: str) -> None:
    """Tells search processes to read the collection's vectors again (knowledge/search/dense.py)."""
    if not CollectionVectors.objects.filter(pk=collection_id).update(drops=F("drops") + 1):
        CollectionVectors.objects.bulk_create(
            [CollectionVectors(collection_id=collection_id, drops=1)], ignore_conflicts=True
        )


def _vectors_held(collection_ids: set[str]) -> None:
    """Holds the collections' CollectionVectors rows (made if missing), in id order, until commit:
    their vectors' ids are then drawn and committed in order (knowledge/search/dense.py)."""
    ordered = sorted(collection_ids)
    CollectionVectors.objects.bulk_create(
        [CollectionVectors(collection_id=collection_id) for collection_id in ordered], ignore_conflicts=True
    )
    list(CollectionVectors.objects.select_for_update().filter(pk__in=ordered).order_by("pk").values_list("pk"))


def _current_document(document_id: str, content_version: int) -> Document | None:
    """The document, locked, unless a newer upload superseded the content this ingest read."""
    document = Document.objects.select_for_update().defer("content").filter(pk=document_id).first()
    if document is None or document.content_version != content_version:
        return None
    return document


@transaction.atomic
def document_chunks_store(*, document_id: str, content_version: int, chunks: Sequence[ChunkText], user_id: str) -> bool:
    """Replaces the document's chunks (new ids) and indexes them; False when superseded."""
    document = _current_document(document_id, content_version)
    if document is None:
        return False
    drop_chunks(document_id)
    rows = []
    for ordinal, chunk in enumerate(chunks):
        row = Chunk(
            document=document,
            collection_id=document.collection_id,
            ordinal=ordinal,
            title=chunk.title,
            page=chunk.page,
            text=chunk.text,
        )
        row.stamp_created(user_id)
        rows.append(row)
    Chunk.objects.bulk_create(rows)
    get_chunk_index().index_chunks(
        rows=[(row.id, document_id, document.collection_id, row.searchable_text) for row in rows]
    )
    document.status = Document.Status.READY
    document.reason = ""
    document.save(update_fields=["status", "reason"])
    return True


@transaction.atomic
def document_ingest_failed(*, document_id: str, content_version: int, reason: str) -> bool:
    document = _current_document(document_id, content_version)
    if document is None:
        return False
    document.status = Document.Status.FAILED
    document.reason = reason
    document.save(update_fields=["status", "reason"])
    return True


def extraction_limits(*, upload_bytes: int) -> ExtractionLimits:
    """The limits of reading an upload of `upload_bytes`: the most text any document may hold, or
    less where its size times KNOWLEDGE_MAX_EXPANSION (never under the floor) is less."""
    cap = settings.KNOWLEDGE_MAX_DOCUMENT_CHARS
    expansion = settings.KNOWLEDGE_MAX_EXPANSION
    relative = max(settings.KNOWLEDGE_EXPANSION_FLOOR_CHARS, expansion * upload_bytes) if expansion > 0 else cap
    return ExtractionLimits(
        max_chars=min(cap, relative),
        max_chunks=settings.KNOWLEDGE_MAX_DOCUMENT_CHUNKS,
        memory_bytes=settings.KNOWLEDGE_EXTRACT_MEMORY_BYTES,
        cpu_seconds=settings.KNOWLEDGE_EXTRACT_CPU_SECONDS,
        timeout_seconds=settings.KNOWLEDGE_EXTRACT_TIMEOUT_SECONDS,
        upload_bytes=upload_bytes if relative < cap else 0,
        expansion=expansion if relative < cap else 0,
    )


def ingest_document(*, document_id: str, content_version: int, user_id: str) -> None:
    """Extracts and stores the chunks of one uploaded version of a document.

    Bytes that cannot be read (a broken PDF, an unknown encoding) or that pass a limit (too much
    text, too many chunks, too much memory or time to read: knowledge/extraction.py) mark the
    document `failed` with the reason at once: running again would read the same bytes. Anything else (the database, the
    search index) raises, so the worker tries again; the task marks the document failed after its
    last attempt.
    """
    row = (
        Document.objects.filter(pk=document_id, content_version=content_version, status=Document.Status.PENDING)
        .values("filename", "content_type", "content")
        .first()
    )
    if row is None:
        return  # done already, deleted, or replaced by a newer upload that has its own ingest
    fmt = document_format(row["filename"], row["content_type"]) or "text"
    content = bytes(row["content"])
    try:
        chunks = extract_chunks(content, fmt, limits=extraction_limits(upload_bytes=len(content)))
    except ExtractionError as exc:
        document_ingest_failed(document_id=document_id, content_version=content_version, reason=str(exc))
        return
    document_chunks_store(document_id=document_id, content_version=content_version, chunks=chunks, user_id=user_id)


def document_embed_turn(*, document_id: str) -> bool:
    """Embeds the next KNOWLEDGE_EMBED_TURN_CHUNKS of the document's chunks that have no vector yet;
    whether more are left for another turn. A turn is short on purpose: the worker runs its tasks
    in order, so a large document embedded in one go would hold everyone else's uploads behind it,
    while turns queued one after another take turns with them (knowledge/tasks.py)."""
    embedder = get_embedder()
    if embedder is None:
        return False
    pending = unembedded_chunks(embedder.model).filter(document_id=document_id)
    turn = list(pending.order_by("ordinal").values_list("pk", flat=True)[: settings.KNOWLEDGE_EMBED_TURN_CHUNKS])
    if not turn:
        return False
    if not chunks_embed(embedder=embedder, chunks=Chunk.objects.filter(pk__in=turn)):
        return False  # the provider failed: what is left is the backfill's (`embeddings_backfill`)
    return pending.exists()


def document_embed(*, document_id: str) -> None:
    """Every turn of the document's embeddings at once, for a caller that is the only work there
    is (the demo's seeding, a benchmark)."""
    while document_embed_turn(document_id=document_id):
        continue


def unembedded_chunks(model: str) -> QuerySet[Chunk]:
    """Chunks with no vector of `model` (none yet, or one of a model no longer configured)."""
    return Chunk.objects.filter(~Exists(ChunkEmbedding.objects.filter(chunk_id=OuterRef("pk"), model=model)))


def chunks_embed(*, embedder: Embedder, chunks: QuerySet[Chunk]) -> int:
    """Embeds and stores `chunks`; returns how many were stored. A provider failure is logged and
    leaves them pending (0): the document stays searchable by words, and the backfill tries again."""
    rows = list(chunks.order_by("document_id", "ordinal").only("document_id", "collection_id", "title", "text"))
    if not rows:
        return 0
    try:
        # The title goes in with the text, as in the search index: "Restores" says what a passage is about.
        vectors = embed_in_batches(embedder, [row.searchable_text for row in rows])
    except EmbeddingError as exc:
        logger.warning("%d chunks stay pending (searched by words only): %s", len(rows), exc)
        return 0
    return chunk_embeddings_store(
        model=embedder.model,
        rows=[(row.pk, row.document_id, row.collection_id, vector) for row, vector in zip(rows, vectors, strict=True)],
    )


@transaction.atomic
def chunk_embeddings_store(*, model: str, rows: Sequence[tuple[str, str, str, object]]) -> int:
    """Stores (chunk_id, document_id, collection_id, vector) rows for the chunks that still exist:
    a re-upload or a delete while the provider worked leaves nothing behind. A vector of another
    model for the same chunk is replaced."""
    _vectors_held({row[2] for row in rows})
    existing = set(Chunk.objects.filter(pk__in=[row[0] for row in rows]).values_list("pk", flat=True))
    kept = [row for row in rows if row[0] in existing]
    replaced = ChunkEmbedding.objects.filter(chunk_id__in=[row[0] for row in kept]).exclude(model=model)
    for collection_id in set(replaced.values_list("collection_id", flat=True)):
        _vectors_dropped(collection_id)
    replaced.delete()
    ChunkEmbedding.objects.bulk_create(
        [
            ChunkEmbedding(
                chunk_id=chunk_id,
                document_id=document_id,
                collection_id=collection_id,
                model=model,
                vector=vector_bytes(vector),
            )
            for chunk_id, document_id, collection_id, vector in kept
        ],
        # Two embedders of one chunk (the ingest task and a backfill) store the same vector: one wins.
        ignore_conflicts=True,
    )
    return len(kept)


def embeddings_backfill(*, limit: int = BACKFILL_BATCH) -> dict[str, int]:
    """The worker's periodic turn: embeds up to `limit` pending chunks (those a failed provider
    left, those ingested before a provider was configured, those of a previous model)."""
    embedder = get_embedder()
    if embedder is None:
        return {"embedded": 0, "pending": 0}
    pending = unembedded_chunks(embedder.model)
    batch = pending.order_by("document_id", "ordinal").values_list("pk", flat=True)[:limit]
    embedded = chunks_embed(embedder=embedder, chunks=Chunk.objects.filter(pk__in=list(batch)))
    return {"embedded": embedded, "pending": pending.count()}

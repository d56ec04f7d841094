"""Ingest: extract, chunk and index an uploaded document, and record how it ended.

Runs in `manage.py worker` as the `ingest_document_task` task (knowledge/tasks.py); the upload
service enqueues it in its own transaction. Each step is guarded by the document's
`content_version`, so an ingest of bytes a newer upload replaced changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.conf import settings
from django.db import transaction

from knowledge.chunking import ChunkText
from knowledge.extraction import ExtractionLimits, extract_chunks
from knowledge.formats import ExtractionError, document_format
from knowledge.models import Chunk, Document
from knowledge.search import get_chunk_index

logger = logging.getLogger(__name__)


def drop_chunks(document_id: str) -> None:
    get_chunk_index().forget_document(document_id=document_id)
    Chunk.objects.filter(document_id=document_id).delete()


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


def extraction_limits() -> ExtractionLimits:
    return ExtractionLimits(
        max_chars=settings.KNOWLEDGE_MAX_DOCUMENT_CHARS,
        max_chunks=settings.KNOWLEDGE_MAX_DOCUMENT_CHUNKS,
        memory_bytes=settings.KNOWLEDGE_EXTRACT_MEMORY_BYTES,
        cpu_seconds=settings.KNOWLEDGE_EXTRACT_CPU_SECONDS,
        timeout_seconds=settings.KNOWLEDGE_EXTRACT_TIMEOUT_SECONDS,
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
    try:
        chunks = extract_chunks(bytes(row["content"]), fmt, limits=extraction_limits())
    except ExtractionError as exc:
        document_ingest_failed(document_id=document_id, content_version=content_version, reason=str(exc))
        return
    document_chunks_store(document_id=document_id, content_version=content_version, chunks=chunks, user_id=user_id)

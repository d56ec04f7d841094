"""Ingest: extract, chunk and index an uploaded document, off the request path."""

from __future__ import annotations

import logging

from django.db import transaction

from knowledge import services
from knowledge.background import run_in_background
from knowledge.formats import ExtractionError, document_format, extract_text, split_into_chunks
from knowledge.models import Document

logger = logging.getLogger(__name__)


def start_ingest(*, document_id: str, user_id: str) -> None:
    """Called at the HTTP boundary; the job starts once the upload is committed and carries the
    uploader's id as an argument, because no request (and no current user) exists on the thread."""
    transaction.on_commit(lambda: run_in_background(lambda: ingest_document(document_id=document_id, user_id=user_id)))


def ingest_document(*, document_id: str, user_id: str) -> None:
    row = Document.objects.filter(pk=document_id).values("filename", "content_type", "content", "content_version")
    document = row.first()
    if document is None:
        return
    version = document["content_version"]
    fmt = document_format(document["filename"], document["content_type"]) or "text"
    try:
        texts = split_into_chunks(extract_text(bytes(document["content"]), fmt))
    except ExtractionError as exc:
        services.document_ingest_failed(
            document_id=document_id, content_version=version, reason=str(exc), user_id=user_id
        )
        return
    except Exception as exc:
        logger.exception("Ingest of document %s failed", document_id)
        services.document_ingest_failed(
            document_id=document_id,
            content_version=version,
            reason=f"Ingest failed unexpectedly ({type(exc).__name__}).",
            user_id=user_id,
        )
        return
    services.document_chunks_store(document_id=document_id, content_version=version, texts=texts, user_id=user_id)

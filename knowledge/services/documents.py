"""Writes of a collection's documents: upload (with its hand-off to ingest), rename, delete, and
staff's rename and purge from admin."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import BinaryIO

from django.conf import settings
from django.db import transaction

from collab.actor import Actor
from collab.background import enqueue
from collab.errors import Conflict, Invalid, TooLarge, UnsupportedType
from knowledge.access import CollectionRight, collection_for, document_for, document_held
from knowledge.formats import SUPPORTED_DESCRIPTION, document_format
from knowledge.ingest import drop_chunks
from knowledge.models import Document
from knowledge.tasks import ingest_document_task


def _upload_content(*, filename: str, content_type: str, data: bytes | BinaryIO) -> bytes:
    """The upload's bytes once its type is one ingest reads, never reading past the limit: a file
    of gigabytes is refused (413) having read one byte more than the limit, not loaded whole."""
    if document_format(filename, content_type) is None:
        raise UnsupportedType(
            error="unsupported_file_type",
            detail=f"{filename!r} ({content_type or 'unknown type'}) cannot be ingested; "
            f"upload {SUPPORTED_DESCRIPTION}.",
        )
    limit = settings.KNOWLEDGE_MAX_UPLOAD_BYTES
    content = data if isinstance(data, bytes) else data.read(limit + 1)
    if len(content) > limit:
        # An uploaded file knows its size; a stream only that it holds more than the limit.
        size = len(content) if isinstance(data, bytes) else getattr(data, "size", None)
        held = f"{size} bytes" if size else f"more than {limit} bytes"
        raise TooLarge(
            error="file_too_large",
            detail=f"{filename!r} has {held}; the limit is {limit}.",
            limit=limit,
        )
    if not content:
        raise Invalid(error="empty_file", detail=f"{filename!r} is empty; there is nothing to ingest.")
    return content


@transaction.atomic
def document_upload(
    *, collection_id: str, actor: Actor, filename: str, content_type: str, data: bytes | BinaryIO
) -> Document:
    """Stores the bytes (given, or read from an uploaded file once the caller may write) as a
    pending document and enqueues its ingest with it; the same filename in a collection replaces
    that document's content and keeps its id (spec "Events" 3)."""
    # Held until commit, as renames hold it: an upload and a rename naming one file go in turn.
    collection = collection_for(
        collection_id, actor=actor, need=CollectionRight.WRITE, action="upload documents", lock=True
    )
    filename = _clean_filename(filename)
    data = _upload_content(filename=filename, content_type=content_type, data=data)
    document = (
        Document.objects.select_for_update().defer("content").filter(collection=collection, filename=filename).first()
    )
    if document is None:
        document = Document(collection=collection, filename=filename)
        document.stamp_created(actor.user_id)
    else:
        # The old chunks describe the old bytes: gone now, so nobody retrieves stale text while
        # the new ingest runs. Their citation events stay as history.
        drop_chunks(document.id)
        document.content_version += 1
        document.stamp_updated(actor.user_id)
        document.replaced_by, document.replaced_at = actor.user_id, document.updated_at
    document.content = data
    document.size = len(data)
    document.content_type = content_type
    document.status = Document.Status.PENDING
    document.reason = ""
    document.save()
    enqueue(
        ingest_document_task, document_id=document.id, content_version=document.content_version, user_id=actor.user_id
    )
    return document


def _clean_filename(filename: str) -> str:
    """The name's last path part, checked: 1 to 255 characters and no control characters (a NUL or a
    newline would be stored on SQLite, refused by PostgreSQL, and break every header that names it)."""
    name = filename.strip().replace("\\", "/").rsplit("/", 1)[-1]
    if not name or len(name) > 255 or any(unicodedata.category(character) == "Cc" for character in name):
        raise Invalid(
            error="invalid_filename",
            detail="A file name needs 1 to 255 characters, none of them control characters.",
        )
    return name


@transaction.atomic
def document_rename(*, document_id: str, actor: Actor, filename: str) -> Document:
    """A writer renames a document; another document of that name in the collection is 409."""
    document = document_for(document_id, actor=actor, need=CollectionRight.WRITE, action="rename documents", lock=True)
    return _rename(document, filename=filename, actor=actor)


@transaction.atomic
def document_rename_by_staff(*, document_id: str, actor: Actor, filename: str) -> Document:
    """Staff (admin) rename any document, under the rules a writer's rename keeps."""
    return _rename(document_held(document_id), filename=filename, actor=actor)


def _rename(document: Document, *, filename: str, actor: Actor) -> Document:
    new_name = _clean_filename(filename)
    if new_name == document.filename:
        return document
    if Document.objects.filter(collection_id=document.collection_id, filename=new_name).exists():
        raise Conflict(error="filename_taken", detail=f"{new_name!r} already names a document of this collection.")
    document.filename = new_name
    document.stamp_updated(actor.user_id)
    document.save(update_fields=["filename", "updated_by", "updated_at"])
    return document


@transaction.atomic
def document_delete(*, document_id: str, actor: Actor) -> None:
    """A writer deletes a document and its chunks; its citation events stay as history."""
    document = document_for(document_id, actor=actor, need=CollectionRight.WRITE, action="delete documents", lock=True)
    _purge(document)


@transaction.atomic
def documents_purge(*, document_ids: Sequence[str]) -> int:
    """Staff (admin) delete documents with their chunks and search-index rows; citation events
    stay as history. Returns how many documents went."""
    documents = list(Document.objects.select_for_update().defer("content").filter(pk__in=list(document_ids)))
    for document in documents:
        _purge(document)
    return len(documents)


def _purge(document: Document) -> None:
    drop_chunks(document.id)
    document.delete()

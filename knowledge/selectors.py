"""Reads of the knowledge base; every `cited` is counted from the event log in SQL at read time."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db.models import Func, IntegerField, OuterRef, Q, QuerySet, Subquery, Value

from knowledge.models import (
    Chunk,
    CitationEvent,
    CitationEventChunk,
    Collection,
    Document,
    KbChat,
    KbChatMessage,
    KbChatShare,
)


def _count(rows: QuerySet, key: str) -> Subquery:
    """A correlated `SELECT COUNT(*) ... WHERE key = outer.id`: with an index on `key` each is an
    index-only range count, so a list costs one statement whatever its length. The COUNT is a plain
    function rather than Django's aggregate so no GROUP BY is added; the group step doubled the time."""
    counted = rows.filter(**{key: OuterRef("pk")}).order_by().annotate(n=Func(Value(1), function="COUNT")).values("n")
    return Subquery(counted, output_field=IntegerField())


@dataclass(frozen=True)
class CollectionRow:
    id: str
    name: str
    description: str
    owner: str
    documents: int
    cited: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class DocumentRow:
    id: str
    collection_id: str
    filename: str
    content_type: str
    status: str
    reason: str
    owner: str
    size: int
    chunks: int
    cited: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class ChunkRow:
    id: str
    document_id: str
    ordinal: int
    text: str
    cited: int


@dataclass(frozen=True)
class ChatRow:
    id: str
    title: str
    owner: str
    collection_ids: list[str]
    shared_with: list[str]
    created_at: datetime
    updated_at: datetime
    messages: list[KbChatMessage] = field(default_factory=list)


def _collections(**filters: Any) -> list[CollectionRow]:
    rows = (
        Collection.objects.filter(**filters)
        .annotate(
            document_count=_count(Document.objects.all(), "collection_id"),
            cited=_count(CitationEvent.objects.all(), "collection_id"),
        )
        .values("id", "name", "description", "created_by", "document_count", "cited", "created_at", "updated_at")
    )
    return [CollectionRow(owner=row.pop("created_by"), documents=row.pop("document_count"), **row) for row in rows]


def collections_with_counts() -> list[CollectionRow]:
    return _collections()


def collection_with_counts(*, collection_id: str) -> CollectionRow | None:
    return next(iter(_collections(pk=collection_id)), None)


_DOCUMENT_FIELDS = (
    "id",
    "collection_id",
    "filename",
    "content_type",
    "status",
    "reason",
    "created_by",
    "size",
    "chunks",
    "cited",
    "created_at",
    "updated_at",
)


def _documents(**filters: Any) -> list[DocumentRow]:
    rows = (
        Document.objects.filter(**filters)
        .annotate(
            chunks=_count(Chunk.objects.all(), "document_id"), cited=_count(CitationEvent.objects.all(), "document_id")
        )
        .values(*_DOCUMENT_FIELDS)
    )
    return [DocumentRow(owner=row.pop("created_by"), **row) for row in rows]


def documents_with_counts(*, collection_id: str) -> list[DocumentRow]:
    return _documents(collection_id=collection_id)


def document_with_counts(*, document_id: str) -> DocumentRow | None:
    return next(iter(_documents(pk=document_id)), None)


def chunks_with_counts(*, document_id: str) -> list[ChunkRow]:
    rows = (
        Chunk.objects.filter(document_id=document_id)
        .annotate(cited=_count(CitationEventChunk.objects.all(), "chunk_id"))
        .order_by("ordinal")
        .values("id", "document_id", "ordinal", "text", "cited")
    )
    return [ChunkRow(**row) for row in rows]


def chunk_texts(*, chunk_ids: list[str]) -> dict[str, ChunkRow]:
    """Current chunks among `chunk_ids` (a re-upload may have removed some), with their counts."""
    rows = (
        Chunk.objects.filter(pk__in=chunk_ids)
        .annotate(cited=_count(CitationEventChunk.objects.all(), "chunk_id"))
        .values("id", "document_id", "ordinal", "text", "cited")
    )
    return {row["id"]: ChunkRow(**row) for row in rows}


def _chat_rows(chats: QuerySet) -> list[ChatRow]:
    chats = chats.prefetch_related("collections", "shares")
    return [
        ChatRow(
            id=chat.id,
            title=chat.title,
            owner=chat.created_by,
            collection_ids=sorted(collection.pk for collection in chat.collections.all()),
            shared_with=sorted(share.user_id for share in chat.shares.all()),
            created_at=chat.created_at,
            updated_at=chat.updated_at,
        )
        for chat in chats
    ]


def chats_for_reader(*, user_id: str) -> list[ChatRow]:
    """Chats the caller owns or reads, newest activity first: three statements for any number."""
    shared = KbChatShare.objects.filter(user_id=user_id).values("chat_id")
    return _chat_rows(KbChat.objects.filter(Q(created_by=user_id) | Q(pk__in=shared)).order_by("-updated_at", "id"))


def chat_detail(*, chat: KbChat) -> ChatRow:
    """The chat as its owner and readers see it; the caller has already authorised the reader."""
    row = _chat_rows(KbChat.objects.filter(pk=chat.pk))[0]
    messages = list(KbChatMessage.objects.filter(chat_id=chat.pk).order_by("sequence"))
    return replace(row, messages=messages)


def events_for_message(*, message_id: str) -> list[CitationEvent]:
    return list(CitationEvent.objects.filter(message_id=message_id).prefetch_related("chunk_refs").order_by("marker"))


@dataclass(frozen=True)
class CitedSource:
    """One marker of an answer as the chat page shows it: the chunks it cites, or the saved quote
    when a re-upload has replaced them."""

    marker: int
    document_id: str
    document_name: str
    chunks: list[ChunkRow]
    quote: str


@dataclass(frozen=True)
class TranscriptEntry:
    message: KbChatMessage
    sources: list[CitedSource]


def chat_transcript(*, messages: list[KbChatMessage]) -> list[TranscriptEntry]:
    """Messages with their cited chunks, read in one statement for the whole chat."""
    chunk_ids = [chunk_id for m in messages for c in m.citations for chunk_id in c.get("source_chunk_ids", [])]
    current = chunk_texts(chunk_ids=chunk_ids) if chunk_ids else {}
    return [
        TranscriptEntry(
            message=message,
            sources=[
                CitedSource(
                    marker=int(citation["marker"]),
                    document_id=citation["document_id"],
                    document_name=citation.get("document_name", ""),
                    chunks=[current[i] for i in citation.get("source_chunk_ids", []) if i in current],
                    quote=citation.get("quote", ""),
                )
                for citation in message.citations
            ],
        )
        for message in messages
    ]

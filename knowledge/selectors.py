"""Reads of the knowledge base; every `cited` comes from the event log in SQL at read time.

`cited` = the closed slices' aggregate (CitationTotal, one indexed lookup) + the open slice
counted live (an index range count of the events after `CitationRollup.closed_through`), so a
list costs one statement whose work depends on the open slice, not on the size of the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Func, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from knowledge.models import (
    Chunk,
    CitationEvent,
    CitationEventChunk,
    CitationRollup,
    CitationTotal,
    Collection,
    CollectionWriter,
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


def _closed_through() -> Coalesce:
    """The last event id of the closed slices, as an uncorrelated scalar subquery (run once)."""
    boundary = CitationRollup.objects.filter(pk=CitationRollup.ROW).values("closed_through")[:1]
    return Coalesce(Subquery(boundary), Value(0))


def _cited(scope: str, live: QuerySet, key: str) -> Coalesce:
    """Closed-slice total of the row plus its live count in the open slice."""
    total = CitationTotal.objects.filter(scope=scope, key=OuterRef("pk")).values("cited")[:1]
    live_key = "event_id" if live.model is CitationEventChunk else "id"
    open_slice = live.filter(**{f"{live_key}__gt": _closed_through()})
    return Coalesce(Subquery(total), Value(0)) + _count(open_slice, key)


def _collection_cited() -> Coalesce:
    return _cited(CitationTotal.Scope.COLLECTION, CitationEvent.objects.all(), "collection_id")


def _document_cited() -> Coalesce:
    return _cited(CitationTotal.Scope.DOCUMENT, CitationEvent.objects.all(), "document_id")


def _chunk_cited() -> Coalesce:
    return _cited(CitationTotal.Scope.CHUNK, CitationEventChunk.objects.all(), "chunk_id")


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
    writers: list[str] = field(default_factory=list)


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
    replaced_by: str
    replaced_at: datetime | None


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
            cited=_collection_cited(),
        )
        .values("id", "name", "description", "created_by", "document_count", "cited", "created_at", "updated_at")
    )
    rows = list(rows)
    # Writers of the listed collections in one query: the creator first, then those added.
    added: dict[str, list[str]] = {}
    for collection_id, user_id in CollectionWriter.objects.filter(
        collection_id__in=[row["id"] for row in rows]
    ).values_list("collection_id", "user_id"):
        added.setdefault(collection_id, []).append(user_id)
    return [
        CollectionRow(
            owner=row["created_by"],
            documents=row["document_count"],
            writers=[row["created_by"], *added.get(row["id"], [])],
            **{key: value for key, value in row.items() if key not in {"created_by", "document_count"}},
        )
        for row in rows
    ]


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
    "replaced_by",
    "replaced_at",
)


def _documents(**filters: Any) -> list[DocumentRow]:
    rows = (
        Document.objects.filter(**filters)
        .annotate(chunks=_count(Chunk.objects.all(), "document_id"), cited=_document_cited())
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
        .annotate(cited=_chunk_cited())
        .order_by("ordinal")
        .values("id", "document_id", "ordinal", "text", "cited")
    )
    return [ChunkRow(**row) for row in rows]


def chunk_texts(*, chunk_ids: list[str]) -> dict[str, ChunkRow]:
    """Current chunks among `chunk_ids` (a re-upload may have removed some), with their counts."""
    rows = (
        Chunk.objects.filter(pk__in=chunk_ids)
        .annotate(cited=_chunk_cited())
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


@dataclass(frozen=True)
class CitationCheck:
    """Closed-slice totals plus the live slice, compared with the full aggregate of the log."""

    closed_through: int
    events: int
    mismatches: list[str]

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _full_counts(rows: QuerySet, key: str) -> dict[str, int]:
    return dict(rows.order_by().values_list(key).annotate(n=Count("*")).values_list(key, "n"))


def citation_counts_check() -> CitationCheck:
    """Recounts the whole log (a full scan: for the check command and tests, never for a page).

    Reads one snapshot: an event committed between two statements would otherwise look like drift.
    """
    fresh_transaction = not connection.in_atomic_block
    with transaction.atomic():
        if connection.vendor == "postgresql" and fresh_transaction:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return _check_snapshot()


def _check_snapshot() -> CitationCheck:
    rollup = CitationRollup.objects.filter(pk=CitationRollup.ROW).first()
    boundary = rollup.closed_through if rollup else 0
    events, refs = CitationEvent.objects.all(), CitationEventChunk.objects.all()
    scopes = {
        CitationTotal.Scope.COLLECTION: (events, "collection_id", {"id__gt": boundary}),
        CitationTotal.Scope.DOCUMENT: (events, "document_id", {"id__gt": boundary}),
        CitationTotal.Scope.CHUNK: (refs, "chunk_id", {"event_id__gt": boundary}),
    }
    mismatches = []
    for scope, (rows, key, open_slice) in scopes.items():
        full = _full_counts(rows, key)
        live = _full_counts(rows.filter(**open_slice), key)
        closed = dict(CitationTotal.objects.filter(scope=scope).values_list("key", "cited"))
        for name in sorted(full.keys() | live.keys() | closed.keys()):
            summed = closed.get(name, 0) + live.get(name, 0)
            if summed != full.get(name, 0):
                mismatches.append(
                    f"{scope} {name}: closed {closed.get(name, 0)} + live {live.get(name, 0)} "
                    f"!= log {full.get(name, 0)}"
                )
    return CitationCheck(closed_through=boundary, events=events.count(), mismatches=mismatches)

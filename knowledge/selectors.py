"""Reads of the knowledge base; every `cited` comes from the event log in SQL at read time.

`cited` = the closed slices' aggregate (CitationTotal, one unique-key lookup) + the open slice
counted live (an index range count of the events after `CitationRollup.closed_through`), so a
list costs one statement whose work depends on the open slice, not on the size of the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any, Protocol, TypeVar

from django.db import connection, transaction
from django.db.models import Count, QuerySet

from collab.actor import Actor
from knowledge.access import chat_scope, shared_chat_ids
from knowledge.embeddings import get_embedder
from knowledge.models import (
    Chunk,
    ChunkEmbedding,
    CitationEvent,
    CitationEventChunk,
    CitationRollup,
    CitationTotal,
    Collection,
    CollectionWriter,
    Document,
    KbChat,
    KbChatMessage,
)

Row = TypeVar("Row")  # one of the row dataclasses below

# The three lists with `cited` are fixed SQL: the same statement on SQLite and PostgreSQL, built
# once. Through the ORM, building and compiling their nested subqueries cost several times the
# database's own work on every read (bench/citations.py).
_BOUNDARY = (
    f"COALESCE((SELECT r.closed_through FROM {CitationRollup._meta.db_table} r WHERE r.id = {CitationRollup.ROW}), 0)"
)
_LOGS = {
    CitationTotal.Scope.COLLECTION: (CitationEvent._meta.db_table, "collection_id", "id"),
    CitationTotal.Scope.DOCUMENT: (CitationEvent._meta.db_table, "document_id", "id"),
    CitationTotal.Scope.CHUNK: (CitationEventChunk._meta.db_table, "chunk_id", "event_id"),
}


def _cited(scope: CitationTotal.Scope, *, of: str) -> str:
    """SQL for `cited` of the row whose id is the column `of`: its closed-slice total plus its count
    in the open slice. The boundary is an uncorrelated subquery, evaluated once per statement;
    each count is an index-only range scan of (key, id) past it."""
    log, key, event_id = _LOGS[scope]
    return (
        f"COALESCE((SELECT t.cited FROM {CitationTotal._meta.db_table} t "
        f"WHERE t.scope = '{scope.value}' AND t.key = {of}), 0) "
        f"+ (SELECT COUNT(*) FROM {log} l WHERE l.{key} = {of} AND l.{event_id} > {_BOUNDARY})"
    )


_COLLECTIONS_SQL = (
    "SELECT c.id, c.name, c.description, c.created_by, c.created_at, c.updated_at, "
    f"(SELECT COUNT(*) FROM {Document._meta.db_table} d WHERE d.collection_id = c.id) AS document_count, "
    f"{_cited(CitationTotal.Scope.COLLECTION, of='c.id')} AS cited "
    f"FROM {Collection._meta.db_table} c"
)
_DOCUMENTS_SQL = (
    "SELECT d.id, d.collection_id, d.filename, d.content_type, d.status, d.reason, d.created_by, d.size, "
    "d.created_at, d.updated_at, d.replaced_by, d.replaced_at, "
    f"(SELECT COUNT(*) FROM {Chunk._meta.db_table} k WHERE k.document_id = d.id) AS chunk_count, "
    f"{_cited(CitationTotal.Scope.DOCUMENT, of='d.id')} AS cited "
    f"FROM {Document._meta.db_table} d"
)
_CHUNKS_SQL = (
    f"SELECT k.id, k.document_id, k.ordinal, k.title, k.page, k.text, "
    f"{_cited(CitationTotal.Scope.CHUNK, of='k.id')} AS cited "
    f"FROM {Chunk._meta.db_table} k"
)


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
    title: str
    page: int | None
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


def _row(row_type: type[Row], source: object, *, renamed: dict[str, str], **given: object) -> Row:
    """A `row_type` from the same-named attributes of `source`, but `renamed` (field: attribute) and
    the `given` values."""
    values = {
        column.name: given[column.name]
        if column.name in given
        else getattr(source, renamed.get(column.name, column.name))
        for column in fields(row_type)  # type: ignore[arg-type]
    }
    return row_type(**values)


def _collections(where: str = "", params: tuple[str, ...] = ()) -> list[CollectionRow]:
    collections = list(Collection.objects.raw(f"{_COLLECTIONS_SQL} {where} ORDER BY c.name, c.id", params))
    # Writers of the listed collections in one query: the creator first, then those added.
    added: dict[str, list[str]] = {}
    for collection_id, user_id in CollectionWriter.objects.filter(
        collection_id__in=[collection.id for collection in collections]
    ).values_list("collection_id", "user_id"):
        added.setdefault(collection_id, []).append(user_id)
    return [
        _row(
            CollectionRow,
            collection,
            renamed={"owner": "created_by", "documents": "document_count"},
            writers=[collection.created_by, *added.get(collection.id, [])],
        )
        for collection in collections
    ]


def collections_with_counts() -> list[CollectionRow]:
    return _collections()


def collection_with_counts(*, collection_id: str) -> CollectionRow | None:
    return next(iter(_collections("WHERE c.id = %s", (collection_id,))), None)


@dataclass(frozen=True)
class EmbeddingProgress:
    """How far a collection's chunks are embedded under the configured model (staff see it: until a
    chunk is embedded, questions find it by its words only)."""

    model: str
    chunks: int
    embedded: int

    @property
    def pending(self) -> int:
        return max(self.chunks - self.embedded, 0)


def collection_embedding_progress(*, collection_id: str) -> EmbeddingProgress | None:
    """None without an embedding provider (retrieval is lexical only)."""
    embedder = get_embedder()
    if embedder is None:
        return None
    return EmbeddingProgress(
        model=embedder.model,
        chunks=Chunk.objects.filter(collection_id=collection_id).count(),
        embedded=ChunkEmbedding.objects.filter(collection_id=collection_id, model=embedder.model).count(),
    )


def collection_names(*, collection_ids: list[str]) -> dict[str, str]:
    """Names of the given collections that still exist (a chat's, say): one indexed lookup."""
    return dict(Collection.objects.filter(pk__in=collection_ids).values_list("id", "name"))


def _documents(where: str, params: tuple[str, ...]) -> list[DocumentRow]:
    documents = Document.objects.raw(f"{_DOCUMENTS_SQL} {where} ORDER BY d.filename, d.id", params)
    renamed = {"owner": "created_by", "chunks": "chunk_count"}
    return [_row(DocumentRow, document, renamed=renamed) for document in documents]


def documents_with_counts(*, collection_id: str) -> list[DocumentRow]:
    return _documents("WHERE d.collection_id = %s", (collection_id,))


def document_with_counts(*, document_id: str) -> DocumentRow | None:
    return next(iter(_documents("WHERE d.id = %s", (document_id,))), None)


def _chunks(where: str, params: list[str]) -> list[ChunkRow]:
    with connection.cursor() as cursor:
        cursor.execute(f"{_CHUNKS_SQL} {where} ORDER BY k.document_id, k.ordinal", params)
        return [ChunkRow(*row) for row in cursor.fetchall()]


def chunks_with_counts(*, document_id: str) -> list[ChunkRow]:
    return _chunks("WHERE k.document_id = %s", [document_id])


def chunk_texts(*, chunk_ids: list[str]) -> dict[str, ChunkRow]:
    """Current chunks among `chunk_ids` (a re-upload may have removed some), with their counts."""
    wanted = list(dict.fromkeys(chunk_ids))
    if not wanted:
        return {}
    rows = _chunks(f"WHERE k.id IN ({', '.join(['%s'] * len(wanted))})", wanted)
    return {row.id: row for row in rows}


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


def chats_for_reader(*, actor: Actor) -> list[ChatRow]:
    """Chats the caller owns or reads, newest activity first: three statements for any number."""
    return _chat_rows(KbChat.objects.filter(chat_scope(actor=actor)).order_by("-updated_at", "id"))


def chat_summary(*, chat: KbChat) -> ChatRow:
    """The chat without its messages (what a rename answers); the caller has authorised the reader."""
    return _chat_rows(KbChat.objects.filter(pk=chat.pk))[0]


def chats_shared_with(*, user_id: str, limit: int) -> list[KbChat]:
    """Other people's chats the caller reads, latest activity first: one query (`kb_share_reader_idx`)."""
    return list(KbChat.objects.filter(pk__in=shared_chat_ids(user_id)).order_by("-updated_at", "id")[:limit])


def chat_detail(*, chat: KbChat) -> ChatRow:
    """The chat as its owner and readers see it; the caller has already authorised the reader."""
    messages = list(KbChatMessage.objects.filter(chat_id=chat.pk).order_by("sequence"))
    return replace(chat_summary(chat=chat), messages=messages)


@dataclass(frozen=True)
class CitedSource:
    """One marker of an answer as the chat page shows it: the chunks it cites, or the saved quote
    when a re-upload has replaced them."""

    marker: int
    document_id: str
    document_name: str
    chunks: list[ChunkRow]
    quote: str
    document_exists: bool = True
    title: str = ""

    @property
    def heading(self) -> str:
        """The cited section's headings: as the chunks say now, or as saved with the quote."""
        return self.chunks[0].title if self.chunks else self.title

    @property
    def pages(self) -> list[int]:
        """The PDF pages the cited chunks are on, in order (none for other formats)."""
        return sorted({chunk.page for chunk in self.chunks if chunk.page is not None})


class CitingMessage(Protocol):
    """A message whose `citations` are `Citation.as_dict()`s: a KB chat's, or an item
    conversation's (the agent's answers render with the same component)."""

    id: Any
    role: str  # "user" for a question (its markers are what the asker typed)
    content: str
    citations: list[dict[str, Any]]


@dataclass(frozen=True)
class TranscriptEntry:
    message: CitingMessage
    sources: list[CitedSource]


def chat_transcript(*, messages: Sequence[CitingMessage]) -> list[TranscriptEntry]:
    """Messages with their cited chunks, read in one statement for the whole chat."""
    chunk_ids = [chunk_id for m in messages for c in m.citations for chunk_id in c.get("source_chunk_ids", [])]
    current = chunk_texts(chunk_ids=chunk_ids) if chunk_ids else {}
    document_ids = {c["document_id"] for m in messages for c in m.citations}
    # A quoted document may since have been deleted; its quote stays, the link to it goes.
    existing = set(Document.objects.filter(pk__in=document_ids).values_list("pk", flat=True)) if document_ids else set()
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
                    document_exists=citation["document_id"] in existing,
                    title=citation.get("title", ""),
                )
                for citation in message.citations
            ],
        )
        for message in messages
    ]


@dataclass(frozen=True)
class CitationCheck:
    """`cited` as the lists compute it (closed-slice totals plus the live slice) compared, for every
    collection, document and chunk, with the full aggregate of the log."""

    closed_through: int
    events: int
    open_events: int
    mismatches: list[str]

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _full_counts(rows: QuerySet, key: str) -> dict[str, int]:
    return dict(rows.order_by().values_list(key).annotate(n=Count("*")).values_list(key, "n"))


def _served_counts(scope: CitationTotal.Scope) -> dict[str, int]:
    """`cited` of every key the log or the totals name, by the very SQL the lists use."""
    log, key, _event_id = _LOGS[scope]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT k.key, {_cited(scope, of='k.key')} FROM (SELECT {key} AS key FROM {log} "
            f"UNION SELECT key FROM {CitationTotal._meta.db_table} WHERE scope = %s) k",
            [scope.value],
        )
        return dict(cursor.fetchall())


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
    logs = {
        CitationTotal.Scope.COLLECTION: (events, "collection_id"),
        CitationTotal.Scope.DOCUMENT: (events, "document_id"),
        CitationTotal.Scope.CHUNK: (refs, "chunk_id"),
    }
    mismatches = []
    for scope, (rows, key) in logs.items():
        full = _full_counts(rows, key)
        served = _served_counts(scope)
        closed = dict(CitationTotal.objects.filter(scope=scope).values_list("key", "cited"))
        for name in sorted(full.keys() | served.keys()):
            if served.get(name, 0) != full.get(name, 0):
                total = closed.get(name, 0)
                mismatches.append(
                    f"{scope} {name}: closed {total} + live {served.get(name, 0) - total} != log {full.get(name, 0)}"
                )
    return CitationCheck(
        closed_through=boundary,
        events=events.count(),
        open_events=events.filter(id__gt=boundary).count(),
        mismatches=mismatches,
    )

"""Collections, documents, chunks, KB chats and the append-only citation log."""

from __future__ import annotations

import secrets
from typing import Any, NoReturn

from django.db import models

from collab import clock
from collab.models import TrackedModel


def new_id(prefix: str) -> str:
    """Opaque string ids (the spec's ids are strings); generated here so a service can name a row
    before it is saved, e.g. the answer message an answer's citation events point at."""
    return f"{prefix}_{secrets.token_hex(8)}"


def _collection_id() -> str:
    return new_id("col")


def _document_id() -> str:
    return new_id("doc")


def _chunk_id() -> str:
    return new_id("chk")


def _chat_id() -> str:
    return new_id("chat")


def _message_id() -> str:
    return new_id("msg")


class Collection(TrackedModel):
    id = models.CharField(primary_key=True, max_length=40, default=_collection_id, editable=False)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class CollectionWriter(TrackedModel):
    """Someone the collection's creator lets upload, re-upload, rename and delete its documents
    (docs/ARCHITECTURE.md §6); the creator is a writer without a row. Everyone signed in reads."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="writers")
    user_id = models.CharField(max_length=150)

    class Meta:
        ordering = ["user_id"]
        constraints = [models.UniqueConstraint(fields=["collection", "user_id"], name="kb_writer_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} writes {self.collection_id}"


class Document(TrackedModel):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    id = models.CharField(primary_key=True, max_length=40, default=_document_id, editable=False)
    collection = models.ForeignKey(Collection, on_delete=models.PROTECT, related_name="documents")
    filename = models.CharField(max_length=255)
    content_type = models.CharField(max_length=100, blank=True, default="")
    content = models.BinaryField(default=b"")
    size = models.PositiveBigIntegerField(default=0)
    # Bumped by every upload, so an ingest that finishes after a newer upload throws its work away.
    content_version = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    reason = models.TextField(blank=True, default="")
    # Who last replaced the content by re-uploading the same filename, and when (blank: never).
    replaced_by = models.CharField(max_length=150, blank=True, default="")
    replaced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["filename", "id"]
        constraints = [models.UniqueConstraint(fields=["collection", "filename"], name="kb_doc_unique_filename")]

    def __str__(self) -> str:
        return self.filename


class Chunk(TrackedModel):
    """A searchable passage; the search index (FTS5 table or tsvector column) is kept by the
    migrations and `knowledge.search`, not by Django fields."""

    id = models.CharField(primary_key=True, max_length=40, default=_chunk_id, editable=False)
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunk_rows")
    # Copied from the document so a search restricted to collections needs no join.
    collection = models.ForeignKey(Collection, on_delete=models.PROTECT, related_name="chunks")
    ordinal = models.PositiveIntegerField()
    # The headings the passage sits under (knowledge.formats.TITLE_SEPARATOR between them), kept out
    # of its text, and the PDF page it is on (null for other formats). Both are shown with the
    # passage; the title is also searched (`searchable_text`, and the PostgreSQL search vector of
    # migration 0007).
    title = models.CharField(max_length=300, blank=True, default="")
    page = models.PositiveIntegerField(null=True, blank=True)
    text = models.TextField()

    class Meta:
        ordering = ["document_id", "ordinal"]
        constraints = [models.UniqueConstraint(fields=["document", "ordinal"], name="kb_chunk_unique_ordinal")]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.ordinal}"

    @property
    def searchable_text(self) -> str:
        """What the search index matches: the title, then the text."""
        return f"{self.title}\n\n{self.text}" if self.title else self.text


class ChunkEmbedding(models.Model):
    """A chunk's vector under one embedding model (README "Hybrid retrieval"): float32 bytes, unit
    length. A chunk without a row of the configured model is pending: it is found by words only
    until the ingest task or the worker's backfill embeds it.

    Plain ids rather than a foreign key, like the citation log: a chunk delete stays one statement
    (no cascade collector reading every chunk first), and the deletes that drop chunks drop their
    vectors beside them by the indexed document or collection (knowledge/ingest.py `drop_chunks`).
    """

    # Ids only grow, and a collection's are drawn one writer at a time (CollectionVectors): rows
    # above the highest id a search process has read are the ones added since.
    id = models.BigAutoField(primary_key=True)
    chunk_id = models.CharField(max_length=40, unique=True)
    document_id = models.CharField(max_length=40, db_index=True)
    collection_id = models.CharField(max_length=40)
    model = models.CharField(max_length=200)
    vector = models.BinaryField()

    class Meta:
        indexes = [models.Index(fields=["collection_id", "model", "id"], name="kb_embedding_collection_idx")]

    def __str__(self) -> str:
        return f"{self.chunk_id} ({self.model})"


class CollectionVectors(models.Model):
    """What a search process needs to know its cached vectors of a collection are current, in one
    indexed read (knowledge/search/dense.py): `drops` counts the deletes of the collection's
    vectors (a cache reloads on a change), and writers of its vectors hold this row while they
    insert, so ids are drawn and committed in order and the highest id read tells what was added."""

    collection_id = models.CharField(primary_key=True, max_length=40)
    drops = models.BigIntegerField(default=0)


class KbChat(TrackedModel):
    """A chat over one or more collections; `created_by` is the owner, the only one who may write."""

    id = models.CharField(primary_key=True, max_length=40, default=_chat_id, editable=False)
    title = models.CharField(max_length=200)
    collections = models.ManyToManyField(Collection, related_name="chats")

    class Meta:
        ordering = ["-updated_at", "id"]
        indexes = [models.Index(fields=["created_by", "-updated_at"], name="kb_chat_owner_idx")]

    def __str__(self) -> str:
        return self.title


class KbChatShare(TrackedModel):
    """One read-only reader of a chat: the spec's `shared_with`, as rows so listing is indexed."""

    chat = models.ForeignKey(KbChat, on_delete=models.CASCADE, related_name="shares")
    user_id = models.CharField(max_length=150)

    class Meta:
        ordering = ["user_id"]
        constraints = [models.UniqueConstraint(fields=["chat", "user_id"], name="kb_share_unique_reader")]
        indexes = [models.Index(fields=["user_id"], name="kb_share_reader_idx")]


class KbChatMessage(TrackedModel):
    class Role(models.TextChoices):
        USER = "user", "Question"
        ASSISTANT = "assistant", "Answer"

    id = models.CharField(primary_key=True, max_length=40, default=_message_id, editable=False)
    chat = models.ForeignKey(KbChat, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField()
    # The answer's markers as shown: [{marker, collection_id, document_id, document_name,
    # source_chunk_ids, quote}]; the quote keeps a marker readable after a re-upload drops its chunks.
    citations = models.JSONField(default=list, blank=True)
    sequence = models.PositiveIntegerField()

    class Meta:
        ordering = ["chat_id", "sequence"]
        constraints = [models.UniqueConstraint(fields=["chat", "sequence"], name="kb_message_unique_sequence")]


class AppendOnlyQuerySet(models.QuerySet):
    """The citation log has no update or delete path: counts are history, not state."""

    def update(self, **kwargs: Any) -> NoReturn:
        raise TypeError("Citation events are append-only; they cannot be updated.")

    def delete(self) -> NoReturn:
        raise TypeError("Citation events are append-only; they cannot be deleted.")


class CitationEvent(models.Model):
    """One persisted `[n]` marker (spec resource `citation-event`).

    Not a TrackedModel: an event is never updated, so `updated_*` would be noise; `cited_by` and
    `created_at` are its tracking. Ids are plain strings without foreign keys because documents
    and chunks come and go (a re-upload drops chunks) while their history must stay.

    An event is identified by its origin, its answer and its marker: recording the same answer
    again (a retried task, a replayed callback, two racing writers) finds the key taken and adds
    nothing, while two markers of one answer, or two answers, always count (spec "Events" 3).
    """

    class OriginKind(models.TextChoices):
        KB_CHAT = "kb_chat", "Knowledge-base chat"
        RCA = "rca", "Investigation"

    collection_id = models.CharField(max_length=40)
    document_id = models.CharField(max_length=40)
    origin_kind = models.CharField(max_length=10, choices=OriginKind.choices)
    origin_id = models.CharField(max_length=64)
    cited_by = models.CharField(max_length=150)
    marker = models.PositiveIntegerField()
    message_id = models.CharField(
        max_length=64,
        help_text="The answer the marker belongs to, unique within its origin: a KB chat's answer message, "
        "or an investigation's question message and the number of the agent's question in that turn.",
    )
    created_at = models.DateTimeField(default=clock.now, editable=False)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        constraints = [
            # Origin first: it also serves the lookups of one chat's or investigation's events.
            models.UniqueConstraint(
                fields=["origin_kind", "origin_id", "message_id", "marker"], name="kb_event_once_per_answer"
            ),
        ]
        indexes = [
            # The live (open-slice) part of collection and document `cited`: an index-only range
            # count of the events after the closed slices' last id (see CitationRollup).
            models.Index(fields=["collection_id", "id"], name="kb_event_collection_live_idx"),
            models.Index(fields=["document_id", "id"], name="kb_event_document_live_idx"),
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise TypeError("Citation events are append-only; they cannot be updated.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("Citation events are append-only; they cannot be deleted.")


class CitationEventChunk(models.Model):
    """One of an event's `source_chunk_ids`; per-chunk `cited` is an indexed count of these rows."""

    event = models.ForeignKey(CitationEvent, on_delete=models.PROTECT, related_name="chunk_refs")
    chunk_id = models.CharField(max_length=40)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["event", "chunk_id"], name="kb_event_chunk_unique")]
        # The live part of chunk `cited`: refs of events after the closed slices' last id.
        indexes = [models.Index(fields=["chunk_id", "event"], name="kb_event_chunk_live_idx")]


class CitationRollup(models.Model):
    """The one row that splits the citation log into closed slices and the open slice.

    Events with `id <= closed_through` belong to closed slices: their aggregates are in
    CitationTotal and never change again. Later events are the open slice, counted live.

    No event may ever get an id at or below the boundary, or it would be counted by neither part.
    Ids only grow (an identity column on PostgreSQL, AUTOINCREMENT on SQLite), so the danger is an
    event whose id was drawn before a close and that commits after it. On PostgreSQL each writer of
    events holds WRITERS_LOCK shared until it commits, and the close takes it exclusively before it
    reads the last id: it waits for the writers in flight and holds new ones back until it commits.
    A transaction-level advisory lock rather than a lock on this row: a row lock is written into the
    row (a WAL record per answer, a multixact for concurrent writers), an advisory lock only lives
    in the lock table. SQLite needs nothing: its write transactions start IMMEDIATE and run one
    at a time. Closers and rebuilds serialise on this row (`FOR UPDATE`); readers take no lock.
    """

    ROW = 1
    WRITERS_LOCK = 0x6B625F736C696365  # "kb_slice": the advisory lock key of event writers vs. the close

    id = models.PositiveSmallIntegerField(primary_key=True, default=ROW, editable=False)
    closed_through = models.BigIntegerField(default=0, help_text="Last event id of the closed slices.")
    closed_at = models.DateTimeField(null=True, blank=True, help_text="When the last slice closed.")
    slices = models.PositiveIntegerField(default=0, help_text="Slices closed so far.")


class CitationTotal(models.Model):
    """`cited` of one collection, document or chunk over the closed slices of the log only.

    Written only by the slice close (adds a closed slice's aggregate) and the rebuild (recounts
    the closed slices); never by the write path, so it cannot drift from the log it summarises.
    """

    class Scope(models.TextChoices):
        COLLECTION = "collection", "Collection"
        DOCUMENT = "document", "Document"
        CHUNK = "chunk", "Chunk"

    scope = models.CharField(max_length=10, choices=Scope.choices)
    key = models.CharField(max_length=40)
    cited = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope", "key"], name="kb_total_unique_key")]

"""Writes of the knowledge base: collections, uploads and ingest results, chats, sharing, citations."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, QuerySet

from collab import clock
from collab.background import enqueue
from collab.errors import Conflict, Invalid, TooLarge, UnsupportedType
from collab.identity import get_user_directory, unknown_user_ids
from collab.services import notify
from knowledge.access import (
    chat_for_owner,
    chat_for_reader,
    collection_for_creator,
    collection_for_writer,
    document_for_writer,
    document_held,
)
from knowledge.answers import Answer, Citation, Restart, answer_events
from knowledge.formats import SUPPORTED_DESCRIPTION, document_format
from knowledge.ingest import drop_chunks, drop_collection_chunks
from knowledge.models import (
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
    new_id,
)
from knowledge.tasks import ingest_document_task

NAME_MAX = 200
DESCRIPTION_MAX = 5000


def _checked_text(value: str, *, what: str, limit: int, required: bool = True) -> str:
    """The trimmed value, or 400 naming what is wrong with it (empty, or longer than `limit`)."""
    text = value.strip()
    if required and not text:
        raise Invalid(error="validation_error", detail=f"{what} cannot be empty.")
    if len(text) > limit:
        raise Invalid(error="validation_error", detail=f"{what} has {len(text)} characters; at most {limit}.")
    return text


@transaction.atomic
def collection_create(*, user_id: str, name: str, description: str = "") -> Collection:
    collection = Collection(
        name=_checked_text(name, what="A collection's name", limit=NAME_MAX),
        description=_checked_text(description, what="The description", limit=DESCRIPTION_MAX, required=False),
    )
    collection.stamp_created(user_id)
    collection.save()
    return collection


@transaction.atomic
def collection_rename(*, collection_id: str, user_id: str, name: str, description: str | None = None) -> Collection:
    """A writer renames the collection (and, when given, changes its description); ids, documents
    and citation counts stay as they are."""
    collection = collection_for_writer(collection_id, user_id, action="rename the collection", lock=True)
    collection.name = _checked_text(name, what="A collection's name", limit=NAME_MAX)
    if description is not None:
        collection.description = _checked_text(
            description, what="The description", limit=DESCRIPTION_MAX, required=False
        )
    collection.stamp_updated(user_id)
    collection.save(update_fields=["name", "description", "updated_by", "updated_at"])
    return collection


@transaction.atomic
def collection_delete(*, collection_id: str, user_id: str) -> None:
    """The creator deletes the collection with its documents, chunks and search-index rows.

    Chats that searched it keep their transcripts and stop searching it; the citation log keeps
    every event that named it (history is never rewritten, docs/ARCHITECTURE.md §6).
    """
    collection = collection_for_creator(collection_id, user_id, action="delete the collection", lock=True)
    _purge_collection(collection)


@transaction.atomic
def collections_purge(*, collection_ids: Sequence[str]) -> int:
    """Staff (admin) delete collections as `collection_delete` does; returns how many went."""
    collections = list(Collection.objects.select_for_update().filter(pk__in=list(collection_ids)))
    for collection in collections:
        _purge_collection(collection)
    return len(collections)


def _purge_collection(collection: Collection) -> None:
    # Documents and chunks protect their collection, so they go first, in one statement each.
    drop_collection_chunks(collection.id)
    Document.objects.filter(collection=collection).only("pk").delete()
    collection.delete()


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
    *, collection_id: str, user_id: str, filename: str, content_type: str, data: bytes | BinaryIO
) -> Document:
    """Stores the bytes (given, or read from an uploaded file once the caller may write) as a
    pending document and enqueues its ingest with it; the same filename in a collection replaces
    that document's content and keeps its id (spec "Events" 3)."""
    # Held until commit, as renames hold it: an upload and a rename naming one file go in turn.
    collection = collection_for_writer(collection_id, user_id, action="upload documents", lock=True)
    filename = _clean_filename(filename)
    data = _upload_content(filename=filename, content_type=content_type, data=data)
    document = (
        Document.objects.select_for_update().defer("content").filter(collection=collection, filename=filename).first()
    )
    if document is None:
        document = Document(collection=collection, filename=filename)
        document.stamp_created(user_id)
    else:
        # The old chunks describe the old bytes: gone now, so nobody retrieves stale text while
        # the new ingest runs. Their citation events stay as history.
        drop_chunks(document.id)
        document.content_version += 1
        document.stamp_updated(user_id)
        document.replaced_by, document.replaced_at = user_id, document.updated_at
    document.content = data
    document.size = len(data)
    document.content_type = content_type
    document.status = Document.Status.PENDING
    document.reason = ""
    document.save()
    enqueue(ingest_document_task, document_id=document.id, content_version=document.content_version, user_id=user_id)
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
def document_rename(*, document_id: str, user_id: str, filename: str) -> Document:
    """A writer renames a document; another document of that name in the collection is 409."""
    document = document_for_writer(document_id, user_id, action="rename documents", lock=True)
    return _rename(document, filename=filename, user_id=user_id)


@transaction.atomic
def document_rename_by_staff(*, document_id: str, user_id: str, filename: str) -> Document:
    """Staff (admin) rename any document, under the rules a writer's rename keeps."""
    return _rename(document_held(document_id), filename=filename, user_id=user_id)


def _rename(document: Document, *, filename: str, user_id: str) -> Document:
    new_name = _clean_filename(filename)
    if new_name == document.filename:
        return document
    if Document.objects.filter(collection_id=document.collection_id, filename=new_name).exists():
        raise Conflict(error="filename_taken", detail=f"{new_name!r} already names a document of this collection.")
    document.filename = new_name
    document.stamp_updated(user_id)
    document.save(update_fields=["filename", "updated_by", "updated_at"])
    return document


@transaction.atomic
def document_delete(*, document_id: str, user_id: str) -> None:
    """A writer deletes a document and its chunks; its citation events stay as history."""
    document = document_for_writer(document_id, user_id, action="delete documents", lock=True)
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


@transaction.atomic
def collection_writers_add(*, collection_id: str, user_id: str, user_ids: Sequence[str]) -> list[str]:
    """The creator adds writers; unknown ids are 400 naming them and nothing changes."""
    collection = collection_for_creator(collection_id, user_id)
    wanted = list(dict.fromkeys(uid.strip() for uid in user_ids if uid.strip()))
    unknown = unknown_user_ids(wanted)
    if unknown:
        raise Invalid(
            error="unknown_user", detail=f"Not in the user directory: {', '.join(unknown)}.",
            unknown=unknown,
        )  # fmt: skip
    existing = set(CollectionWriter.objects.filter(collection=collection).values_list("user_id", flat=True))
    fresh = []
    for writer_id in wanted:
        if writer_id in existing or writer_id == collection.created_by:
            continue
        row = CollectionWriter(collection=collection, user_id=writer_id)
        row.stamp_created(user_id)
        fresh.append(row)
    CollectionWriter.objects.bulk_create(fresh, ignore_conflicts=True)
    return collection_writer_ids(collection)


def collection_writer_ids(collection: Collection) -> list[str]:
    return [
        collection.created_by,
        *CollectionWriter.objects.filter(collection=collection).values_list("user_id", flat=True),
    ]


@transaction.atomic
def collection_writer_remove(*, collection_id: str, user_id: str, writer_id: str) -> None:
    collection = collection_for_creator(collection_id, user_id)
    CollectionWriter.objects.filter(collection=collection, user_id=writer_id).delete()


def _chat_title(typed: str, *, default: str) -> str:
    """The typed title, checked as a rename checks it, or `default` when nothing was typed."""
    return _checked_text(typed, what="A chat's title", limit=NAME_MAX, required=False) or default


@transaction.atomic
def chat_create(*, user_id: str, title: str, collection_ids: Sequence[str]) -> KbChat:
    wanted = list(dict.fromkeys(collection_ids))
    if not wanted:
        raise Invalid(error="validation_error", detail="Choose at least one collection.")
    found = set(_collections_held(Collection.objects.filter(pk__in=wanted)))
    missing = [collection_id for collection_id in wanted if collection_id not in found]
    if missing:
        raise Invalid(
            error="unknown_collections",
            detail=f"No such collection: {', '.join(missing)}.",
            collection_ids=missing,
        )
    chat = KbChat(title=_chat_title(title, default="New chat"))
    chat.stamp_created(user_id)
    chat.save()
    chat.collections.set(wanted)
    return chat


def _collections_held(collections: QuerySet[Collection]) -> list[str]:
    """The ids of `collections` that exist, their rows held until commit (in id order, so two
    holders never deadlock): a delete of one waits, so a chat never links a collection deleted
    meanwhile, and one deleted first is simply not found."""
    held = collections.select_for_update(of=("self",), no_key=True).order_by("pk")
    return list(held.values_list("pk", flat=True))


@transaction.atomic
def chat_rename(*, chat_id: str, user_id: str, title: str) -> KbChat:
    chat = chat_for_owner(chat_id, user_id, action="rename it", lock=True)
    chat.title = _checked_text(title, what="A chat's title", limit=NAME_MAX)
    chat.stamp_updated(user_id)
    chat.save(update_fields=["title", "updated_by", "updated_at"])
    return chat


@transaction.atomic
def chat_delete(*, chat_id: str, user_id: str) -> None:
    """The owner deletes the chat with its messages and shares; readers lose it. The citation
    events its answers wrote stay in the log, so the counts they made do not drop."""
    chat_for_owner(chat_id, user_id, action="delete it", lock=True).delete()


@transaction.atomic
def chat_copy(*, chat_id: str, user_id: str, title: str = "") -> KbChat:
    """The owner or a reader copies the chat into a new chat of the caller's, over the same
    collections, with the same messages (each still showing who asked it), to go on asking there.

    The original is not changed, its readers are not carried over, and no citation event is
    written: copying an answer cites nothing anew.
    """
    original = chat_for_reader(chat_id, user_id)
    default_title = f"Copy of {original.title}"[:NAME_MAX]
    copy = KbChat(title=_chat_title(title, default=default_title))
    copy.stamp_created(user_id)
    copy.save()
    copy.collections.set(_collections_held(original.collections.all()))
    KbChatMessage.objects.bulk_create(
        KbChatMessage(
            chat=copy,
            role=message.role,
            content=message.content,
            citations=message.citations,
            sequence=message.sequence,
            created_by=message.created_by,
            updated_by=message.created_by,
            created_at=message.created_at,
            updated_at=message.created_at,
        )
        for message in original.messages.order_by("sequence")
    )
    return copy


@dataclass(frozen=True)
class ChatExchange:
    question: KbChatMessage
    answer: KbChatMessage


@dataclass(frozen=True)
class ChatQuestion:
    """A question its chat's owner may ask, checked; nothing is stored yet."""

    chat_id: str
    user_id: str
    text: str
    collection_ids: list[str]


def chat_question_check(*, chat_id: str, user_id: str, content: str) -> ChatQuestion:
    """The refusals of a send, before anything is answered: a chat that is not the caller's
    (404, a reader's 403 `read_only_share`) and an empty question (400)."""
    chat = chat_for_owner(chat_id, user_id, action="send messages")
    question_text = content.strip()
    if not question_text:
        raise Invalid(error="validation_error", detail="The question is empty.")
    return ChatQuestion(
        chat_id=chat.id,
        user_id=user_id,
        text=question_text,
        collection_ids=list(chat.collections.values_list("pk", flat=True)),
    )


def chat_answer_events(question: ChatQuestion) -> Iterator[str | Restart | ChatExchange]:
    """Answers a checked question: the answer's text as it is written (a `Restart` should the
    model fail midway, then the fallback), and last the exchange, stored whole.

    No transaction spans the answering: a model may write for a minute, and the chat's lock (on
    SQLite, the database's) would be held as long. The question and its answer are stored together
    once the answer is done, so a failure anywhere before stores nothing, never half an exchange.
    """
    answer = None
    for event in answer_events(question=question.text, collection_ids=question.collection_ids):
        if isinstance(event, Answer):
            answer = event
        else:
            yield event
    if answer is None:
        raise TypeError("the answerer ended without an answer")
    yield _exchange_store(question, answer)


def chat_message_send(*, chat_id: str, user_id: str, content: str) -> ChatExchange:
    """Stores the question, answers it, stores the answer and one citation event per marker."""
    question = chat_question_check(chat_id=chat_id, user_id=user_id, content=content)
    *_, exchange = chat_answer_events(question)
    return exchange


@transaction.atomic
def _exchange_store(question: ChatQuestion, answer: Answer) -> ChatExchange:
    """The question, its answer and one citation event per marker that counts, in one transaction.

    The chat row is locked (checked again: it may have been deleted or handed over meanwhile) so
    concurrent sends to one chat number their messages in turn.
    """
    chat = chat_for_owner(question.chat_id, question.user_id, action="send messages", lock=True)
    sequence = (chat.messages.aggregate(last=Max("sequence"))["last"] or 0) + 1
    asked = _message(chat, question.user_id, KbChatMessage.Role.USER, question.text, sequence)
    answer_id = new_id("msg")
    record_citations(
        citations=answer.persisted_citations(),
        origin_kind=CitationEvent.OriginKind.KB_CHAT,
        origin_id=chat.id,
        cited_by=chat.created_by,
        message_id=answer_id,
    )
    reply = _message(
        chat,
        question.user_id,
        KbChatMessage.Role.ASSISTANT,
        answer.text,
        sequence + 1,
        message_id=answer_id,
        citations=[citation.as_dict() for citation in answer.citations],
    )
    chat.stamp_updated(question.user_id)
    chat.save(update_fields=["updated_by", "updated_at"])
    return ChatExchange(question=asked, answer=reply)


def _message(
    chat: KbChat,
    user_id: str,
    role: str,
    content: str,
    sequence: int,
    *,
    message_id: str | None = None,
    citations: list[dict] | None = None,
) -> KbChatMessage:
    message = KbChatMessage(chat=chat, role=role, content=content, sequence=sequence, citations=citations or [])
    if message_id:
        message.id = message_id
    message.stamp_created(user_id)
    message.save(force_insert=True)
    return message


@transaction.atomic
def chat_share(*, chat_id: str, user_id: str, user_ids: Sequence[str]) -> list[str]:
    """Adds readers; only the newly added ones are notified. Returns the readers after the change."""
    chat = chat_for_owner(chat_id, user_id, action="share it", lock=True)
    wanted = list(dict.fromkeys(user_ids))
    unknown = unknown_user_ids(wanted)
    if unknown:
        raise Invalid(
            error="unknown_users",
            detail=f"Not in the user directory: {', '.join(unknown)}.",
            user_ids=unknown,
        )
    existing = set(chat.shares.values_list("user_id", flat=True))
    added = [reader for reader in wanted if reader != chat.created_by and reader not in existing]
    shares = []
    for reader in added:
        share = KbChatShare(chat=chat, user_id=reader)
        share.stamp_created(user_id)
        shares.append(share)
    KbChatShare.objects.bulk_create(shares)
    if added:
        sharer = get_user_directory().get(user_id)
        notify(
            added,
            "share",
            title=f"{sharer.name if sharer else user_id} shared a chat with you",
            body=chat.title,
            link=f"/kb/chats/{chat.id}",
            actor=user_id,
        )
    return sorted(existing | set(added))


@transaction.atomic
def chat_unshare(*, chat_id: str, user_id: str, reader_id: str) -> None:
    """Removing someone who is not a reader changes nothing and is not an error."""
    chat = chat_for_owner(chat_id, user_id, action="change who it is shared with", lock=True)
    KbChatShare.objects.filter(chat=chat, user_id=reader_id).delete()


def record_citations(
    *,
    citations: Sequence[Citation],
    origin_kind: str,
    origin_id: str,
    cited_by: str,
    message_id: str,
) -> int:
    """Appends one event per marker of the answer `message_id` (with its chunk rows); returns how
    many were new.

    One insert per table: the events' insert skips the markers this origin already recorded for
    this answer (its unique key, conflicts ignored) and returns the new rows, whose chunk rows are
    the second insert. Recording an answer again, even concurrently, therefore never counts twice;
    the first recording of a marker stands.
    """
    if origin_kind not in CitationEvent.OriginKind.values:
        raise ValueError(f"origin_kind must be one of {CitationEvent.OriginKind.values}, not {origin_kind!r}.")
    by_marker = {citation.marker: citation for citation in reversed(citations) if citation.marker > 0}
    if not by_marker:
        return 0
    with transaction.atomic():
        _slice_lock(exclusive=False)
        fresh = _insert_events(by_marker, origin_kind, origin_id, cited_by, message_id)
        CitationEventChunk.objects.bulk_create(
            CitationEventChunk(event_id=event_id, chunk_id=chunk_id)
            for event_id, marker in fresh
            for chunk_id in dict.fromkeys(by_marker[marker].source_chunk_ids)
        )
    return len(fresh)


def _slice_lock(*, exclusive: bool) -> None:
    """Event writers share CitationRollup.WRITERS_LOCK until they commit; the close holds it alone,
    so no event drawn before a close commits after it (why an advisory lock: see CitationRollup).

    SQLite needs nothing: its write transactions start IMMEDIATE and so run one at a time.
    """
    if connection.vendor == "postgresql":
        function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {function}(%s)", [CitationRollup.WRITERS_LOCK])


def _insert_events(
    by_marker: dict[int, Citation], origin_kind: str, origin_id: str, cited_by: str, message_id: str
) -> list[tuple[int, int]]:
    """`INSERT ... ON CONFLICT DO NOTHING RETURNING id, marker` (PostgreSQL and SQLite >= 3.35)."""
    moment = connection.ops.adapt_datetimefield_value(clock.now())
    markers = sorted(by_marker)
    rows = [
        (by_marker[m].collection_id, by_marker[m].document_id, origin_kind, origin_id, cited_by, m, message_id, moment)
        for m in markers
    ]
    values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s)"] * len(rows))
    sql = (
        f"INSERT INTO {CitationEvent._meta.db_table} "
        "(collection_id, document_id, origin_kind, origin_id, cited_by, marker, message_id, created_at) "
        f"VALUES {values} ON CONFLICT (origin_kind, origin_id, message_id, marker) DO NOTHING RETURNING id, marker"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [value for row in rows for value in row])
        return sorted(cursor.fetchall(), key=lambda row: row[1])


@dataclass(frozen=True)
class SliceClose:
    closed: bool
    events: int
    closed_through: int


def _rollup_locked() -> CitationRollup:
    """The rollup row, held FOR UPDATE: one close or rebuild at a time; event writers do not wait."""
    rollup, _ = CitationRollup.objects.select_for_update().get_or_create(pk=CitationRollup.ROW)
    return rollup


def _add_closed_slice(*, after: int, through: int) -> None:
    """Adds the aggregates of events `after < id <= through` to the totals: three set-based upserts."""
    if through <= after:
        return
    totals, events, refs = (
        CitationTotal._meta.db_table,
        CitationEvent._meta.db_table,
        CitationEventChunk._meta.db_table,
    )
    upsert = f"ON CONFLICT (scope, key) DO UPDATE SET cited = {totals}.cited + excluded.cited"
    with connection.cursor() as cursor:
        for scope, column, table, id_column in (
            (CitationTotal.Scope.COLLECTION, "collection_id", events, "id"),
            (CitationTotal.Scope.DOCUMENT, "document_id", events, "id"),
            (CitationTotal.Scope.CHUNK, "chunk_id", refs, "event_id"),
        ):
            cursor.execute(
                f"INSERT INTO {totals} (scope, key, cited) SELECT %s, {column}, COUNT(*) FROM {table} "
                f"WHERE {id_column} > %s AND {id_column} <= %s GROUP BY {column} {upsert}",
                [str(scope), after, through],
            )


SLICE_HOURS = 1


@transaction.atomic
def citation_slices_close() -> SliceClose:
    """Closes the open slice of the citation log at most once per clock hour (the worker calls this
    every pass): its aggregates join the totals and the boundary moves to the last event id.

    Cheap when there is nothing to do (one locked read). Closing an empty slice only moves the time.
    Event writers wait while a slice closes: the time of an hour's aggregates (bench/citations.py).
    """
    rollup = _rollup_locked()
    moment = clock.now()
    hour = moment.replace(minute=0, second=0, microsecond=0)
    if rollup.closed_at is not None and rollup.closed_at >= hour:
        return SliceClose(closed=False, events=0, closed_through=rollup.closed_through)
    _slice_lock(exclusive=True)
    last = CitationEvent.objects.aggregate(last=Max("id"))["last"] or 0
    through = max(last, rollup.closed_through)
    _add_closed_slice(after=rollup.closed_through, through=through)
    events = CitationEvent.objects.filter(id__gt=rollup.closed_through, id__lte=through).count()
    rollup.closed_through, rollup.closed_at, rollup.slices = through, moment, rollup.slices + 1
    rollup.save()
    return SliceClose(closed=True, events=events, closed_through=through)


@transaction.atomic
def citation_totals_rebuild() -> SliceClose:
    """Recounts the closed slices from the log (the boundary stays): repairs anything a hand did."""
    rollup = _rollup_locked()
    CitationTotal.objects.all().delete()
    _add_closed_slice(after=0, through=rollup.closed_through)
    events = CitationEvent.objects.filter(id__lte=rollup.closed_through).count()
    return SliceClose(closed=False, events=events, closed_through=rollup.closed_through)

"""Writes of chats: create, rename, delete, copy, a question and its stored answer, and sharing."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max, QuerySet

from collab.actor import Actor
from collab.errors import Invalid
from collab.identity import get_user_directory, unknown_user_ids
from collab.models import CommandSlot
from collab.services import notify
from collab.slots import answer_slot_take, slot_release
from knowledge.access import ChatRight, chat_for
from knowledge.answers import Answer, Restart, answer_events
from knowledge.models import CitationEvent, Collection, KbChat, KbChatMessage, KbChatShare, new_id
from knowledge.services.citations import record_citations
from knowledge.services.text import NAME_MAX, QUESTION_MAX, checked_text


def _chat_title(typed: str, *, default: str) -> str:
    """The typed title, checked as a rename checks it, or `default` when nothing was typed."""
    return checked_text(typed, what="A chat's title", limit=NAME_MAX, required=False) or default


@transaction.atomic
def chat_create(*, actor: Actor, title: str, collection_ids: Sequence[str]) -> KbChat:
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
    chat.stamp_created(actor.user_id)
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
def chat_rename(*, chat_id: str, actor: Actor, title: str) -> KbChat:
    chat = chat_for(chat_id, actor=actor, need=ChatRight.OWN, action="rename it", lock=True)
    chat.title = checked_text(title, what="A chat's title", limit=NAME_MAX)
    chat.stamp_updated(actor.user_id)
    chat.save(update_fields=["title", "updated_by", "updated_at"])
    return chat


@transaction.atomic
def chat_delete(*, chat_id: str, actor: Actor) -> None:
    """The owner deletes the chat with its messages and shares; readers lose it. The citation
    events its answers wrote stay in the log, so the counts they made do not drop."""
    chat_for(chat_id, actor=actor, need=ChatRight.OWN, action="delete it", lock=True).delete()


@transaction.atomic
def chat_copy(*, chat_id: str, actor: Actor, title: str = "") -> KbChat:
    """The owner or a reader copies the chat into a new chat of the caller's, over the same
    collections, with the same messages (each still showing who asked it), to go on asking there.

    The original is not changed, its readers are not carried over, and no citation event is
    written: copying an answer cites nothing anew.
    """
    original = chat_for(chat_id, actor=actor)
    default_title = f"Copy of {original.title}"[:NAME_MAX]
    copy = KbChat(title=_chat_title(title, default=default_title))
    copy.stamp_created(actor.user_id)
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
    actor: Actor
    text: str
    collection_ids: list[str]
    # The person's command slot a model's answer holds until it is stored (collab.slots).
    slot: CommandSlot | None = None


def chat_question_check(*, chat_id: str, actor: Actor, content: str) -> ChatQuestion:
    """The refusals of a send, before anything is answered: a chat that is not the caller's
    (404, a reader's 403 `read_only_share`), an empty question, one too long or one with a NUL
    (400) and, when a model writes the answers, a person whose request slots are all taken (429
    with Retry-After). The slot taken here goes back when `chat_answer_events` ends (or expires,
    should it never start)."""
    chat = chat_for(chat_id, actor=actor, need=ChatRight.OWN, action="send messages")
    # Before a model is asked: a question no database would store wastes its answer.
    question_text = checked_text(content, what="The question", limit=QUESTION_MAX)
    collection_ids = list(chat.collections.values_list("pk", flat=True))
    return ChatQuestion(
        chat_id=chat.id,
        actor=actor,
        text=question_text,
        collection_ids=collection_ids,
        slot=answer_slot_take(user_id=actor.user_id),
    )


def chat_answer_events(question: ChatQuestion) -> Iterator[str | Restart | ChatExchange]:
    """Answers a checked question: the answer's text as it is written (a `Restart` should the
    model fail midway, then the fallback), and last the exchange, stored whole.

    No transaction spans the answering: a model may write for a minute, and the chat's lock (on
    SQLite, the database's) would be held as long. The question and its answer are stored together
    once the answer is done, so a failure anywhere before stores nothing, never half an exchange.
    """
    try:
        answer = None
        for event in answer_events(question=question.text, collection_ids=question.collection_ids):
            if isinstance(event, Answer):
                answer = event
            else:
                yield event
        if answer is None:
            raise TypeError("the answerer ended without an answer")
        yield _exchange_store(question, answer)
    finally:
        slot_release(question.slot)


def chat_message_send(*, chat_id: str, actor: Actor, content: str) -> ChatExchange:
    """Stores the question, answers it, stores the answer and one citation event per marker."""
    question = chat_question_check(chat_id=chat_id, actor=actor, content=content)
    *_, exchange = chat_answer_events(question)
    return exchange


@transaction.atomic
def _exchange_store(question: ChatQuestion, answer: Answer) -> ChatExchange:
    """The question, its answer and one citation event per marker that counts, in one transaction.

    The chat row is locked (checked again: it may have been deleted or handed over meanwhile) so
    concurrent sends to one chat number their messages in turn.
    """
    chat = chat_for(question.chat_id, actor=question.actor, need=ChatRight.OWN, action="send messages", lock=True)
    sequence = (chat.messages.aggregate(last=Max("sequence"))["last"] or 0) + 1
    asked = _message(chat, question.actor.user_id, KbChatMessage.Role.USER, question.text, sequence)
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
        question.actor.user_id,
        KbChatMessage.Role.ASSISTANT,
        answer.text,
        sequence + 1,
        message_id=answer_id,
        citations=[citation.as_dict() for citation in answer.citations],
    )
    chat.stamp_updated(question.actor.user_id)
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
def chat_share(*, chat_id: str, actor: Actor, user_ids: Sequence[str]) -> list[str]:
    """Adds readers; only the newly added ones are notified. Returns the readers after the change."""
    chat = chat_for(chat_id, actor=actor, need=ChatRight.OWN, action="share it", lock=True)
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
        share.stamp_created(actor.user_id)
        shares.append(share)
    KbChatShare.objects.bulk_create(shares)
    if added:
        sharer = get_user_directory().get(actor.user_id)
        notify(
            added,
            "share",
            title=f"{sharer.name if sharer else actor.user_id} shared a chat with you",
            body=chat.title,
            link=f"/kb/chats/{chat.id}",
            actor=actor.user_id,
        )
    return sorted(existing | set(added))


@transaction.atomic
def chat_unshare(*, chat_id: str, actor: Actor, reader_id: str) -> None:
    """Removing someone who is not a reader changes nothing and is not an error."""
    chat = chat_for(chat_id, actor=actor, need=ChatRight.OWN, action="change who it is shared with", lock=True)
    KbChatShare.objects.filter(chat=chat, user_id=reader_id).delete()

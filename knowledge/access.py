"""Who may see and change collections, documents and chats, for an actor, each kind in one shape: one
object (`collection_for`, `document_for`, `chat_for`: fetch and authorise for a `need`), many
(`collection_rights`, `document_rights`, `chat_rights`) and the SQL scope of a list
(`collection_scope`, `document_scope`, `chat_scope`). Collections are the team's library, read by
everyone signed in; a document's rights are its collection's; a chat you may not read looks
exactly like one that does not exist. Staff have no right here beyond anyone's: the library's
writers are each collection's creator's choice, and chats are private to their owner and readers.
"""

from __future__ import annotations

import enum
from collections.abc import Container, Iterable
from typing import Any

from django.db.models import Q
from django.http import Http404

from collab.actor import Actor
from collab.errors import Forbidden
from knowledge.models import Collection, CollectionWriter, Document, KbChat, KbChatShare

# -- collections and their documents ------------------------------------------------------------


class CollectionRight(enum.IntEnum):
    """What a person may do with a collection (and its documents), each right including the one before."""

    READ = 1  # everyone signed in: the team's library
    WRITE = 2  # its writers: upload, rename and delete documents, rename the collection
    OWN = 3  # its creator: choose the writers, delete the collection


def collection_right_of(*, creator: str, writers: Container[str], actor: Actor) -> CollectionRight | None:
    """The rule, decided here once, on a collection's creator and writers already read (`writers`
    may include the creator). None: nobody is asking."""
    if not actor.is_someone:
        return None
    if actor.is_user(creator):
        return CollectionRight.OWN
    return CollectionRight.WRITE if actor.user_id in writers else CollectionRight.READ


def collection_rights(collections: Iterable[Collection], *, actor: Actor) -> dict[str, CollectionRight]:
    """The right `actor` has to each of `collections`, by id: one query for the writers among the
    collections they did not create, none when they created them all."""
    collections = list(collections)
    others = [c.pk for c in collections if not actor.is_user(c.created_by)]
    writing: set[str] = set()
    if others and actor.is_someone:
        rows = CollectionWriter.objects.filter(collection_id__in=others, user_id=actor.user_id)
        writing = set(rows.values_list("collection_id", flat=True))
    rights = {
        c.pk: collection_right_of(creator=c.created_by, writers={actor.user_id} if c.pk in writing else (), actor=actor)
        for c in collections
    }
    return {pk: right for pk, right in rights.items() if right is not None}


def collection_right(collection: Collection, *, actor: Actor) -> CollectionRight | None:
    return collection_rights([collection], actor=actor).get(collection.pk)


def collection_scope(*, actor: Actor) -> Q:
    """The scope of a collection list, in SQL: the whole library for anyone signed in."""
    return Q() if actor.is_someone else Q(pk__in=[])


def collection_for(
    collection_id: str,
    *,
    actor: Actor,
    need: CollectionRight = CollectionRight.READ,
    action: str = "choose its writers",
    lock: bool = False,
) -> Collection:
    """The collection, if `actor` has the right `need` to it (`lock`: held until commit). Everyone
    may see it, so a reader or a writer asking for more learns why they may not `action` (403)."""
    return _collection_checked(_collection_row(collection_id, lock=lock), actor=actor, need=need, action=action)


def _collection_row(collection_id: str, *, lock: bool) -> Collection | None:
    collections = Collection.objects.select_for_update() if lock else Collection.objects.all()
    return collections.filter(pk=collection_id).first()


def _collection_checked(
    collection: Collection | None, *, actor: Actor, need: CollectionRight, action: str
) -> Collection:
    if collection is None:
        raise Http404("No such collection.")
    if need == CollectionRight.READ:
        # Reading needs no writer lookup: with the writers unread the rule still tells READ.
        right = collection_right_of(creator=collection.created_by, writers=(), actor=actor)
    else:
        right = collection_right(collection, actor=actor)
    if right is None:
        raise Http404("No such collection.")
    if right < need:
        raise _not_a_writer(collection, action) if need == CollectionRight.WRITE else _not_creator(collection, action)
    return collection


def _not_a_writer(collection: Collection, action: str) -> Forbidden:
    return Forbidden(
        error="not_a_writer",
        detail=f"Only the writers of {collection.name!r} can {action}; ask {collection.created_by} to add you.",
    )


def _not_creator(collection: Collection, action: str) -> Forbidden:
    return Forbidden(
        error="not_collection_creator",
        detail=f"Only {collection.created_by}, who created {collection.name!r}, can {action}.",
    )


def document_rights(documents: Iterable[Document], *, actor: Actor) -> dict[str, CollectionRight]:
    """The right `actor` has to each of `documents` (with their collections), by id: their collection's."""
    documents = list(documents)
    by_collection = collection_rights({d.collection.pk: d.collection for d in documents}.values(), actor=actor)
    return {d.pk: by_collection[d.collection.pk] for d in documents if d.collection.pk in by_collection}


def document_scope(*, actor: Actor) -> Q:
    """The scope of a document list, in SQL: the documents of the collections the actor may list."""
    return Q() if actor.is_someone else Q(pk__in=[])


def document_for(
    document_id: str,
    *,
    actor: Actor,
    need: CollectionRight = CollectionRight.READ,
    action: str = "change its documents",
    lock: bool = False,
) -> Document:
    """The document (without its content, with its collection), if `actor` has the right `need` to
    its collection; with `lock`, held as `document_held` holds it."""
    if lock:
        document = document_held(document_id)
    else:
        document = Document.objects.defer("content").select_related("collection").filter(pk=document_id).first()
    if document is None:
        raise Http404("No such document.")
    _collection_checked(document.collection, actor=actor, need=need, action=action)
    return document


def document_held(document_id: str) -> Document:
    """The document, locked until commit after its collection's row; not an access check (the
    caller has made one).

    Every write of a collection's documents (upload, rename, delete, the collection's delete)
    holds the collection first, so two writes naming one file are judged one after the other
    (the second sees what the first left) and they never take the two locks in opposite orders.
    """
    collection_id = Document.objects.filter(pk=document_id).values_list("collection_id", flat=True).first()
    if collection_id is None:
        raise Http404("No such document.")
    if _collection_row(collection_id, lock=True) is None:
        raise Http404("No such collection.")
    document = (
        Document.objects.select_for_update(of=("self",))
        .defer("content")
        .select_related("collection")
        .filter(pk=document_id)
        .first()
    )
    if document is None:
        raise Http404("No such document.")
    return document


# -- chats --------------------------------------------------------------------------------------


class ChatRight(enum.IntEnum):
    """What a person may do with a chat: its readers read it; its owner also asks, renames, shares
    and deletes."""

    READ = 1
    OWN = 2


def shared_chat_ids(user_id: str) -> Any:
    """The ids of the chats shared with `user_id`, as a subquery (`kb_share_reader_idx`)."""
    return KbChatShare.objects.filter(user_id=user_id).values("chat_id")


def chat_right_of(*, owner: str, readers: Container[str], actor: Actor) -> ChatRight | None:
    """The rule, decided here once, on a chat's owner (its creator) and readers already read. None:
    not theirs to know of (staff included)."""
    if actor.is_user(owner):
        return ChatRight.OWN
    return ChatRight.READ if actor.is_someone and actor.user_id in readers else None


def chat_rights(chats: Iterable[KbChat], *, actor: Actor) -> dict[str, ChatRight]:
    """The right `actor` has to each of `chats`, by id; a chat missing from the answer is not theirs
    to know of. One query for the shares of the chats they do not own, none when they own them all."""
    chats = list(chats)
    others = [chat.pk for chat in chats if not actor.is_user(chat.created_by)]
    reading: set[str] = set()
    if others and actor.is_someone:
        shared = KbChatShare.objects.filter(chat_id__in=others, user_id=actor.user_id)
        reading = set(shared.values_list("chat_id", flat=True))
    rights = {
        chat.pk: chat_right_of(
            owner=chat.created_by, readers={actor.user_id} if chat.pk in reading else (), actor=actor
        )
        for chat in chats
    }
    return {pk: right for pk, right in rights.items() if right is not None}


def chat_scope(*, actor: Actor) -> Q:
    """The scope of a chat list, in SQL: the chats the actor owns (created) or that are shared
    with them; staff read no one else's chats either."""
    if not actor.is_someone:
        return Q(pk__in=[])
    return Q(created_by=actor.user_id) | Q(pk__in=shared_chat_ids(actor.user_id))


def chat_for(
    chat_id: str, *, actor: Actor, need: ChatRight = ChatRight.READ, action: str = "change it", lock: bool = False
) -> KbChat:
    """The chat, if `actor` has the right `need` to it (`lock`: held until commit). A stranger gets
    404; a shared reader asking for more learns the chat is read-only for them (403)."""
    chats = KbChat.objects.select_for_update(of=("self",)) if lock else KbChat.objects.all()
    chat = chats.filter(pk=chat_id).first()
    right = None if chat is None else chat_rights([chat], actor=actor).get(chat.pk)
    if chat is None or right is None:
        raise Http404("No such chat.")
    if right < need:
        raise Forbidden(
            error="read_only_share",
            detail=f"This chat is shared with you read-only; only its owner can {action}.",
        )
    return chat

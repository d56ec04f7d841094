"""Who may see and change collections and chats, for an actor: one object (`chat_for_reader`,
`collection_for_writer`, ...) and the SQL scope of a chat list (`readable_chats`); collections
are the team's library, read by everyone signed in. A chat you may not read looks
exactly like one that does not exist."""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.http import Http404

from collab.actor import Actor
from collab.errors import Forbidden
from knowledge.models import Collection, CollectionWriter, Document, KbChat, KbChatShare


def shared_chat_ids(user_id: str) -> Any:
    """The ids of the chats shared with `user_id`, as a subquery (`kb_share_reader_idx`)."""
    return KbChatShare.objects.filter(user_id=user_id).values("chat_id")


def readable_chats(*, actor: Actor) -> Q:
    """The scope of a chat list, in SQL: the chats the actor owns (created) or that are shared
    with them; staff read no one else's chats either."""
    if not actor.is_someone:
        return Q(pk__in=[])
    return Q(created_by=actor.user_id) | Q(pk__in=shared_chat_ids(actor.user_id))


def collection_or_404(collection_id: str, *, lock: bool = False) -> Collection:
    """Collections are the team's shared library: every signed-in user reads them."""
    collections = Collection.objects.select_for_update() if lock else Collection.objects.all()
    collection = collections.filter(pk=collection_id).first()
    if collection is None:
        raise Http404("No such collection.")
    return collection


def is_writer(collection: Collection, user_id: str) -> bool:
    """The creator, and the people the creator added, change a collection's documents."""
    if not user_id:
        return False
    return (
        collection.created_by == user_id
        or CollectionWriter.objects.filter(collection=collection, user_id=user_id).exists()
    )


def collection_for_writer(collection_id: str, *, actor: Actor, action: str, lock: bool = False) -> Collection:
    """Everyone may see the collection, so a reader learns why they may not change it (403)."""
    return _writer_checked(collection_or_404(collection_id, lock=lock), actor=actor, action=action)


def _writer_checked(collection: Collection, *, actor: Actor, action: str) -> Collection:
    if not is_writer(collection, actor.user_id):
        raise Forbidden(
            error="not_a_writer",
            detail=f"Only the writers of {collection.name!r} can {action}; ask {collection.created_by} to add you.",
        )
    return collection


def collection_for_creator(
    collection_id: str, *, actor: Actor, action: str = "choose its writers", lock: bool = False
) -> Collection:
    """Choosing the writers and deleting the whole collection are its creator's alone."""
    collection = collection_or_404(collection_id, lock=lock)
    if collection.created_by != actor.user_id:
        raise Forbidden(
            error="not_collection_creator",
            detail=f"Only {collection.created_by}, who created {collection.name!r}, can {action}.",
        )
    return collection


def document_or_404(document_id: str) -> Document:
    document = Document.objects.defer("content").filter(pk=document_id).first()
    if document is None:
        raise Http404("No such document.")
    return document


def document_held(document_id: str) -> Document:
    """The document, locked until commit after its collection's row.

    Every write of a collection's documents (upload, rename, delete, the collection's delete)
    holds the collection first, so two writes naming one file are judged one after the other
    (the second sees what the first left) and they never take the two locks in opposite orders.
    """
    collection_id = Document.objects.filter(pk=document_id).values_list("collection_id", flat=True).first()
    if collection_id is None:
        raise Http404("No such document.")
    collection_or_404(collection_id, lock=True)
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


def document_for_writer(document_id: str, *, actor: Actor, action: str, lock: bool = False) -> Document:
    """With `lock`, the document is held as `document_held` holds it."""
    if lock:
        document = document_held(document_id)
    else:
        document = Document.objects.defer("content").select_related("collection").filter(pk=document_id).first()
    if document is None:
        raise Http404("No such document.")
    _writer_checked(document.collection, actor=actor, action=action)
    return document


def chat_for_reader(chat_id: str, *, actor: Actor, lock: bool = False) -> KbChat:
    """The owner or a shared reader gets the chat; anyone else gets 404."""
    chats = KbChat.objects.select_for_update(of=("self",)) if lock else KbChat.objects.all()
    chat = chats.filter(pk=chat_id).first()
    if chat is None:
        raise Http404("No such chat.")
    if chat.created_by != actor.user_id and not KbChatShare.objects.filter(chat=chat, user_id=actor.user_id).exists():
        raise Http404("No such chat.")
    return chat


def chat_for_owner(chat_id: str, *, actor: Actor, action: str, lock: bool = False) -> KbChat:
    """A shared reader learns the chat is read-only (403); a stranger still gets 404."""
    chat = chat_for_reader(chat_id, actor=actor, lock=lock)
    if chat.created_by != actor.user_id:
        raise Forbidden(
            error="read_only_share",
            detail=f"This chat is shared with you read-only; only its owner can {action}.",
        )
    return chat

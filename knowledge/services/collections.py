"""Writes of collections: create, rename, delete (the creator's, or staff's purge), and who writes them."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from collab.actor import Actor
from collab.errors import Invalid
from collab.identity import unknown_user_ids
from knowledge.access import CollectionRight, collection_for
from knowledge.ingest import drop_collection_chunks
from knowledge.models import Collection, CollectionWriter, Document
from knowledge.services.text import DESCRIPTION_MAX, NAME_MAX, checked_text


@transaction.atomic
def collection_create(*, actor: Actor, name: str, description: str = "") -> Collection:
    collection = Collection(
        name=checked_text(name, what="A collection's name", limit=NAME_MAX),
        description=checked_text(description, what="The description", limit=DESCRIPTION_MAX, required=False),
    )
    collection.stamp_created(actor.user_id)
    collection.save()
    return collection


@transaction.atomic
def collection_rename(*, collection_id: str, actor: Actor, name: str, description: str | None = None) -> Collection:
    """A writer renames the collection (and, when given, changes its description); ids, documents
    and citation counts stay as they are."""
    collection = collection_for(
        collection_id, actor=actor, need=CollectionRight.WRITE, action="rename the collection", lock=True
    )
    collection.name = checked_text(name, what="A collection's name", limit=NAME_MAX)
    if description is not None:
        collection.description = checked_text(
            description, what="The description", limit=DESCRIPTION_MAX, required=False
        )
    collection.stamp_updated(actor.user_id)
    collection.save(update_fields=["name", "description", "updated_by", "updated_at"])
    return collection


@transaction.atomic
def collection_delete(*, collection_id: str, actor: Actor) -> None:
    """The creator deletes the collection with its documents, chunks and search-index rows.

    Chats that searched it keep their transcripts and stop searching it; the citation log keeps
    every event that named it (history is never rewritten, docs/ARCHITECTURE.md §6).
    """
    collection = collection_for(
        collection_id, actor=actor, need=CollectionRight.OWN, action="delete the collection", lock=True
    )
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


@transaction.atomic
def collection_writers_add(*, collection_id: str, actor: Actor, user_ids: Sequence[str]) -> list[str]:
    """The creator adds writers; unknown ids are 400 naming them and nothing changes."""
    collection = collection_for(collection_id, actor=actor, need=CollectionRight.OWN)
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
        row.stamp_created(actor.user_id)
        fresh.append(row)
    CollectionWriter.objects.bulk_create(fresh, ignore_conflicts=True)
    return collection_writer_ids(collection)


def collection_writer_ids(collection: Collection) -> list[str]:
    return [
        collection.created_by,
        *CollectionWriter.objects.filter(collection=collection).values_list("user_id", flat=True),
    ]


@transaction.atomic
def collection_writer_remove(*, collection_id: str, actor: Actor, writer_id: str) -> None:
    collection = collection_for(collection_id, actor=actor, need=CollectionRight.OWN)
    CollectionWriter.objects.filter(collection=collection, user_id=writer_id).delete()

"""Two writes of the knowledge base that meet on PostgreSQL, where they really run side by side:
the second waits for the first and is then judged on what the first left, never a 500.

Each test holds the first write's transaction open until the second is waiting on a lock it
holds (seen in pg_stat_activity), then commits it; found while attacking the rename, delete and
copy forms."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections, transaction

from collab.actor import Actor
from collab.errors import Conflict, DomainError
from knowledge import services
from knowledge.models import Collection, Document, KbChat

pytestmark = [
    pytest.mark.postgres(reason="SQLite runs one writer at a time, so the writes never meet"),
    pytest.mark.django_db(transaction=True),
]


def _someone_waits_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


def _second_after_first(first: Callable[[], Any], second: Callable[[], Any]) -> Any:
    """Runs `first` in a transaction held open until `second`, on its own connection, waits on it;
    returns what `second` returned or the exception it raised."""
    holding, release = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def run_first() -> None:
        try:
            with transaction.atomic():
                first()
                holding.set()
                release.wait(30)
        finally:
            connections.close_all()

    def run_second() -> None:
        holding.wait(30)
        try:
            outcome["second"] = second()
        except Exception as exc:  # the test asserts what came out, whatever it is
            outcome["second"] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run_first), threading.Thread(target=run_second)]
    for thread in threads:
        thread.start()
    holding.wait(30)
    for _ in range(3000):
        if _someone_waits_on_a_lock() or not threads[1].is_alive():
            break
        threading.Event().wait(0.01)
    release.set()
    for thread in threads:
        thread.join(30)
    return outcome["second"]


def _document(collection: Collection, filename: str) -> Document:
    return services.document_upload(
        collection_id=collection.id, actor=Actor("alice"), filename=filename, content_type="text/markdown", data=b"# x"
    )


def test_two_renames_to_one_name_at_once_refuse_the_second_with_409(make_collection):
    # Given two documents of alice's collection
    collection = make_collection("Runbooks")
    first, second = _document(collection, "a.md"), _document(collection, "b.md")

    # When both are renamed to x.md at the same moment
    outcome = _second_after_first(
        lambda: services.document_rename(document_id=first.id, actor=Actor("alice"), filename="x.md"),
        lambda: services.document_rename(document_id=second.id, actor=Actor("alice"), filename="x.md"),
    )

    # Then the second is told the name is taken, and each document keeps one name
    assert isinstance(outcome, Conflict)
    assert outcome.error == "filename_taken"
    assert dict(Document.objects.values_list("id", "filename")) == {first.id: "x.md", second.id: "b.md"}


def test_an_upload_meeting_a_rename_to_its_name_replaces_the_renamed_document(make_collection):
    # Given a document of alice's collection
    collection = make_collection("Runbooks")
    renamed = _document(collection, "a.md")

    # When it is renamed to y.md while y.md is uploaded
    outcome = _second_after_first(
        lambda: services.document_rename(document_id=renamed.id, actor=Actor("alice"), filename="y.md"),
        lambda: _document(collection, "y.md"),
    )

    # Then the upload replaces the content of the document now named y.md, as a re-upload does
    assert isinstance(outcome, Document)
    assert outcome.id == renamed.id
    assert list(Document.objects.values_list("filename", flat=True)) == ["y.md"]


def test_copying_a_chat_while_its_collection_is_deleted_copies_it_without_the_collection(make_collection):
    # Given bob's chat over alice's collection
    collection = make_collection("Runbooks")
    chat = services.chat_create(actor=Actor("bob"), title="Questions", collection_ids=[collection.id])

    # When bob copies the chat while alice deletes the collection
    outcome = _second_after_first(
        lambda: services.collection_delete(collection_id=collection.id, actor=Actor("alice")),
        lambda: services.chat_copy(chat_id=chat.id, actor=Actor("bob")),
    )

    # Then the copy is made, searching nothing, as the original now does
    assert isinstance(outcome, KbChat)
    assert list(outcome.collections.all()) == []
    assert not Collection.objects.exists()


def test_starting_a_chat_while_its_collection_is_deleted_is_refused_naming_it(make_collection):
    # Given alice's collection
    collection = make_collection("Runbooks")

    # When bob starts a chat over it while alice deletes it
    outcome = _second_after_first(
        lambda: services.collection_delete(collection_id=collection.id, actor=Actor("alice")),
        lambda: services.chat_create(actor=Actor("bob"), title="Questions", collection_ids=[collection.id]),
    )

    # Then bob is told the collection does not exist, and no chat was made
    assert isinstance(outcome, DomainError)
    assert outcome.error == "unknown_collections"
    assert not KbChat.objects.exists()

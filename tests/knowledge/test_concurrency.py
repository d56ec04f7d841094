"""Concurrent answers writing citation events, on real transactions and threads."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import OperationalError, connections

from knowledge import services
from knowledge.answers import Citation
from knowledge.ingest import ingest_document
from knowledge.models import Chunk, CitationEvent, KbChatMessage
from tests.fixtures.knowledge import HANDBOOK

pytestmark = pytest.mark.django_db(transaction=True)

WORKERS = 4


def _in_thread(work):
    """Runs `work` on a pool thread, released together with the others by a barrier.

    The SQLite test database is in memory with a shared cache, where a second writer gets
    "database table is locked" at once instead of waiting out the busy timeout as it does on a
    database file (WORKSPACE_SQLITE_TEST_DB) or PostgreSQL; only that error is retried.
    """
    barrier = threading.Barrier(WORKERS)

    def run(*args):
        try:
            barrier.wait()
            for _ in range(2000):
                try:
                    return work(*args)
                except OperationalError as exc:
                    if "table is locked" not in str(exc):
                        raise
                    threading.Event().wait(0.002)
            raise AssertionError("the shared-cache test database stayed locked")
        finally:
            connections.close_all()

    return run


@pytest.fixture
def library(make_collection):
    collection = make_collection("Handbook")
    for filename, text in HANDBOOK.items():
        document = services.document_upload(
            collection_id=collection.id,
            user_id="alice",
            filename=filename,
            content_type="text/markdown",
            data=text.encode(),
        )
        ingest_document(document_id=document.id, content_version=document.content_version, user_id="alice")
    return collection


def test_concurrent_answers_in_separate_chats_record_every_event(library):
    # Given the handbook and four of alice's chats over it
    chats = [
        services.chat_create(user_id="alice", title=f"Chat {n}", collection_ids=[library.id]) for n in range(WORKERS)
    ]

    def send(chat_id):
        return services.chat_message_send(chat_id=chat_id, user_id="alice", content="quota sandbox sharing chat")

    # When one question is sent into each chat at the same moment
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        exchanges = list(pool.map(_in_thread(send), [chat.id for chat in chats]))

    # Then every citation of every answer is one event, and each chat has its events
    expected = sum(len(exchange.answer.citations) for exchange in exchanges)
    assert expected >= WORKERS
    assert CitationEvent.objects.count() == expected
    assert set(CitationEvent.objects.values_list("origin_id", flat=True)) == {chat.id for chat in chats}


def test_concurrent_answers_in_one_chat_are_numbered_in_turn(library):
    # Given alice's chat over the handbook
    chat = services.chat_create(user_id="alice", title="Busy", collection_ids=[library.id])

    def send(number):
        return services.chat_message_send(chat_id=chat.id, user_id="alice", content=f"quota question {number}")

    # When four questions are sent into it at the same moment
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        list(pool.map(_in_thread(send), range(WORKERS)))

    # Then the eight messages are numbered 1 to 8 without a gap or a repeat, and each answer has its events
    sequences = sorted(KbChatMessage.objects.filter(chat=chat).values_list("sequence", flat=True))
    assert sequences == list(range(1, 2 * WORKERS + 1))
    assert CitationEvent.objects.values("message_id").distinct().count() == WORKERS


def test_concurrent_replays_of_one_answer_count_once(library):
    # Given one answer's citation of a handbook chunk
    chunk = Chunk.objects.first()
    citations = [Citation(1, library.id, chunk.document_id, "x", (chunk.id,))]

    def replay(_):
        return services.record_citations(
            citations=citations, origin_kind="rca", origin_id="inv_1", cited_by="bob", message_id="msg_same"
        )

    # When four workers record it at the same moment
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        added = list(pool.map(_in_thread(replay), range(WORKERS)))

    # Then one of them records it and the others add nothing
    assert sorted(added) == [0] * (WORKERS - 1) + [1]
    assert CitationEvent.objects.count() == 1

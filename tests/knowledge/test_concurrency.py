"""Concurrent answers writing citation events, on real transactions and threads."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import pytest
from django.db import connections, transaction

from collab.actor import Actor
from knowledge import selectors, services
from knowledge.answers import Citation
from knowledge.ingest import ingest_document
from knowledge.models import Chunk, CitationEvent, CitationTotal, KbChatMessage
from tests.fixtures.knowledge import HANDBOOK

pytestmark = pytest.mark.django_db(transaction=True)

WORKERS = 4
ANSWERS = 30


def _in_thread(work):
    """Runs `work` on a pool thread, released together with the others by a barrier (the SQLite
    test database is a file, tests/conftest.py, so a second writer waits out the busy timeout)."""
    barrier = threading.Barrier(WORKERS)

    def run(*args):
        try:
            barrier.wait()
            return work(*args)
        finally:
            connections.close_all()

    return run


@pytest.fixture
def library(make_collection):
    collection = make_collection("Handbook")
    for filename, text in HANDBOOK.items():
        document = services.document_upload(
            collection_id=collection.id,
            actor=Actor("alice"),
            filename=filename,
            content_type="text/markdown",
            data=text.encode(),
        )
        ingest_document(document_id=document.id, content_version=document.content_version, user_id="alice")
    return collection


def test_concurrent_answers_in_separate_chats_record_every_event(library):
    # Given the handbook and four of alice's chats over it
    chats = [
        services.chat_create(actor=Actor("alice"), title=f"Chat {n}", collection_ids=[library.id])
        for n in range(WORKERS)
    ]

    def send(chat_id):
        return services.chat_message_send(chat_id=chat_id, actor=Actor("alice"), content="quota sandbox sharing chat")

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
    chat = services.chat_create(actor=Actor("alice"), title="Busy", collection_ids=[library.id])

    def send(number):
        return services.chat_message_send(chat_id=chat.id, actor=Actor("alice"), content=f"quota question {number}")

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


def test_counts_equal_the_log_at_every_check_while_answers_are_written_and_slices_close(library, clock):
    # Given three writers, each recording answers of two markers, and a worker that closes a slice
    # and checks the counts for as long as they write
    chunks = list(Chunk.objects.order_by("document_id", "ordinal"))
    writers_left = [WORKERS - 1]
    counter = threading.Lock()
    # One close per answer written at most: SQLite's busy handler is not fair, and a closer that
    # took the write lock again at once kept the writers waiting past their busy timeout.
    answers_written = threading.Semaphore(0)

    def record(worker: int, number: int) -> None:
        first, second = chunks[number % len(chunks)], chunks[(number + worker) % len(chunks)]
        services.record_citations(
            citations=[
                Citation(1, library.id, first.document_id, "x", (first.id,)),
                Citation(2, library.id, second.document_id, "x", (second.id, first.id)),
            ],
            origin_kind="kb_chat",
            origin_id=f"chat_{worker}",
            cited_by="alice",
            message_id=f"msg_{number}",
        )
        answers_written.release()

    def close_and_check() -> list[selectors.CitationCheck]:
        checks = []
        while writers_left[0] > 0 or len(checks) < 2:
            answers_written.acquire(timeout=1)
            clock.advance(hours=1)
            services.citation_slices_close()
            checks.append(selectors.citation_counts_check())
        return checks

    def work(role: int) -> list[selectors.CitationCheck]:
        if role == 0:
            return close_and_check()
        try:
            for number in range(ANSWERS):
                record(role, number)
        finally:
            # A writer that failed ends the closer's loop too, so the failure is reported, not a hang.
            with counter:
                writers_left[0] -= 1
        return []

    # When they run at once
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        checks, *_writers = pool.map(_in_thread(work), range(WORKERS))

    # Then every check, taken between writes and closes, found totals plus the live slice equal to
    # the log, and at the end every answer counts exactly once
    written = 2 * ANSWERS * (WORKERS - 1)
    assert [check.mismatches for check in checks] == [[]] * len(checks)
    assert CitationTotal.objects.filter(scope="collection").exists()
    final = selectors.citation_counts_check()
    assert final.ok
    assert final.events == CitationEvent.objects.count() == written
    assert selectors.collection_with_counts(collection_id=library.id).cited == written


@pytest.mark.postgres(reason="SQLite runs one writer at a time, so no answer is in flight")
def test_a_slice_close_waits_for_an_answer_in_flight_then_closes_over_it(library, clock):
    # Given an answer whose events are inserted but not yet committed
    chunk = Chunk.objects.first()
    inserted, commit = threading.Event(), threading.Event()

    def write_slowly() -> None:
        try:
            with transaction.atomic():
                services.record_citations(
                    citations=[Citation(1, library.id, chunk.document_id, "x", (chunk.id,))],
                    origin_kind="kb_chat", origin_id="chat_1", cited_by="alice", message_id="msg_slow",
                )  # fmt: skip
                inserted.set()
                commit.wait(30)
        finally:
            connections.close_all()

    def close() -> services.SliceClose:
        try:
            return services.citation_slices_close()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=2) as pool:
        writer = pool.submit(write_slowly)
        assert inserted.wait(30)
        # When the hour ends and the worker closes the slice meanwhile
        clock.advance(hours=1)
        closing = pool.submit(close)
        with pytest.raises(FutureTimeout):
            closing.result(timeout=0.5)
        commit.set()
        writer.result(timeout=30)
        closed = closing.result(timeout=30)

    # Then the close waited for the answer and its event is inside the closed slice, counted once
    event = CitationEvent.objects.get(message_id="msg_slow")
    assert closed.closed_through >= event.id
    assert CitationTotal.objects.get(scope="document", key=chunk.document_id).cited == 1
    assert selectors.citation_counts_check().ok

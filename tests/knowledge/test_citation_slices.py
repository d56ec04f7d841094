"""Closed slices of the citation log: totals + live slice == the full log, at every moment."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from knowledge.answers import Citation
from knowledge.models import Chunk, CitationEvent, CitationEventChunk, CitationRollup, CitationTotal
from knowledge.selectors import citation_counts_check
from knowledge.services import citation_slices_close, citation_totals_rebuild, record_citations
from knowledge.services import citations as citation_services

pytestmark = pytest.mark.django_db

TEXT = "\n\n".join(f"Part {n}. " + "Disk quota is checked when a file is written. " * 14 for n in range(4))


@pytest.fixture
def cited_document(make_collection, upload):
    collection = make_collection()
    document_id = upload(collection.id, "disk.txt", TEXT).json()["id"]
    chunk_ids = list(Chunk.objects.filter(document_id=document_id).order_by("ordinal").values_list("id", flat=True))
    return collection, document_id, chunk_ids


def _record(collection_id, document_id, chunk_groups, *, message_id):
    return record_citations(
        citations=[
            Citation(marker, collection_id, document_id, "disk.txt", tuple(chunks))
            for marker, chunks in enumerate(chunk_groups, start=1)
        ],
        origin_kind="kb_chat",
        origin_id="chat_1",
        cited_by="alice",
        message_id=message_id,
    )


def _record_and_close(collection_id, document_id, chunk_groups, *, clock):
    """Answer "msg_a" cites the chunk groups; then the hour ends and the worker closes its slice."""
    _record(collection_id, document_id, chunk_groups, message_id="msg_a")
    clock.advance(hours=1)
    return citation_slices_close()


def _counts(api, collection_id, document_id):
    collection = next(row for row in api.get("/kb/collections").json() if row["id"] == collection_id)
    document = api.get(f"/kb/documents/{document_id}").json()
    chunks = [chunk["cited"] for chunk in api.get(f"/kb/documents/{document_id}/chunks").json()]
    return collection["cited"], document["cited"], chunks


def test_counts_equal_the_log_right_after_events_are_written(cited_document, alice_api, clock):
    # Given a document
    collection, document_id, chunk_ids = cited_document

    # When an answer cites it and no slice has closed yet
    _record(collection.id, document_id, [chunk_ids[:2], [chunk_ids[1]]], message_id="msg_a")

    # Then the live slice alone gives the counts, and the check agrees with the log
    assert _counts(alice_api, collection.id, document_id) == (2, 2, [1, 2, 0, 0])
    assert citation_counts_check().ok
    assert not CitationTotal.objects.exists()


def test_closing_a_slice_moves_its_counts_into_totals_and_changes_no_count(cited_document, alice_api, clock):
    # Given events in the open slice
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [chunk_ids[:3]], message_id="msg_a")
    before = _counts(alice_api, collection.id, document_id)

    # When the next hour begins and the worker closes the slice
    clock.advance(hours=1)
    result = citation_slices_close()

    # Then the slice's aggregates are totals, the boundary is its last event, and counts are unchanged
    assert (result.closed, result.events) == (True, 1)
    assert CitationRollup.objects.get().closed_through == CitationEvent.objects.get().id
    assert CitationTotal.objects.get(scope="document", key=document_id).cited == 1
    assert CitationTotal.objects.filter(scope="chunk").count() == 3
    assert _counts(alice_api, collection.id, document_id) == before == (1, 1, [1, 1, 1, 0])
    assert citation_counts_check().ok


def test_events_after_a_close_are_counted_live_on_top_of_the_totals(cited_document, alice_api, clock):
    # Given a closed slice
    collection, document_id, chunk_ids = cited_document
    _record_and_close(collection.id, document_id, [[chunk_ids[0]]], clock=clock)

    # When another answer cites the same chunk in the open slice
    clock.advance(minutes=10)
    _record(collection.id, document_id, [[chunk_ids[0]], [chunk_ids[3]]], message_id="msg_b")

    # Then totals and live events add up, and the check agrees with the log
    assert _counts(alice_api, collection.id, document_id) == (3, 3, [2, 0, 0, 1])
    assert citation_counts_check().ok


def test_a_slice_closes_at_most_once_per_clock_hour(cited_document, clock):
    # Given a slice closed in this hour
    collection, document_id, chunk_ids = cited_document
    citation_slices_close()
    _record(collection.id, document_id, [[chunk_ids[0]]], message_id="msg_a")

    # When the worker passes again within the hour, and then in the next hour
    again = citation_slices_close()
    clock.advance(hours=1)
    next_hour = citation_slices_close()

    # Then only the next hour's pass closes the slice
    assert (again.closed, next_hour.closed, next_hour.events) == (False, True, 1)
    assert CitationRollup.objects.get().slices == 2
    assert citation_counts_check().ok


def test_replaying_an_answer_after_its_slice_closed_does_not_count_twice(cited_document, alice_api, clock):
    # Given an answer whose events are in a closed slice
    collection, document_id, chunk_ids = cited_document
    _record_and_close(collection.id, document_id, [[chunk_ids[0]], [chunk_ids[1]]], clock=clock)

    # When the same answer is recorded again
    replayed = _record(collection.id, document_id, [[chunk_ids[0]], [chunk_ids[1]]], message_id="msg_a")

    # Then nothing new is stored and no count moves
    assert replayed == 0
    assert (CitationEvent.objects.count(), CitationEventChunk.objects.count()) == (2, 2)
    assert _counts(alice_api, collection.id, document_id) == (2, 2, [1, 1, 0, 0])
    assert citation_counts_check().ok


def test_a_re_uploaded_document_keeps_its_closed_history(cited_document, upload, alice_api, clock):
    # Given citations in a closed slice
    collection, document_id, chunk_ids = cited_document
    _record_and_close(collection.id, document_id, [chunk_ids[:2]], clock=clock)

    # When the document is re-uploaded (new chunks with new ids)
    upload(collection.id, "disk.txt", TEXT + "\n\nA new part.")

    # Then the document keeps its count, new chunks start at zero, old chunk totals stay as history
    collection_cited, document_cited, chunks = _counts(alice_api, collection.id, document_id)
    assert (collection_cited, document_cited, set(chunks)) == (1, 1, {0})
    assert CitationTotal.objects.get(scope="chunk", key=chunk_ids[0]).cited == 1
    assert citation_counts_check().ok


def test_the_check_finds_tampered_totals_and_the_rebuild_repairs_them(cited_document, clock):
    # Given a closed slice whose total someone changed by hand
    collection, document_id, chunk_ids = cited_document
    _record_and_close(collection.id, document_id, [[chunk_ids[0]]], clock=clock)
    CitationTotal.objects.filter(scope="document").update(cited=40)

    # When the check command runs, then it fails naming the drift
    with pytest.raises(CommandError, match="1 counts differ"):
        call_command("citations_check")

    # When the rebuild command runs, then the totals equal the log again
    call_command("citations_rebuild")
    call_command("citations_check")
    assert CitationTotal.objects.get(scope="document").cited == 1
    assert citation_totals_rebuild().events == 1


def test_lists_stay_one_statement_with_closed_and_live_events(
    cited_document, make_collection, alice_api, clock, django_assert_max_num_queries
):
    # Given closed and live events over several collections
    collection, document_id, chunk_ids = cited_document
    for number in range(5):
        make_collection(f"Other {number}")
    _record_and_close(collection.id, document_id, [[chunk_ids[0]]], clock=clock)
    _record(collection.id, document_id, [[chunk_ids[0]]], message_id="msg_b")

    # When each list is read, then each is at most two statements (the list and its writers, or
    # the path lookup and the list)
    with django_assert_max_num_queries(2):
        collections = alice_api.get("/kb/collections").json()
    with django_assert_max_num_queries(2):
        documents = alice_api.get(f"/kb/collections/{collection.id}/documents").json()
    with django_assert_max_num_queries(2):
        chunks = alice_api.get(f"/kb/documents/{document_id}/chunks").json()

    assert len(collections) == 6
    assert documents[0]["cited"] == 2
    assert chunks[0]["cited"] == 2


def test_recording_an_answer_is_one_insert_per_table(cited_document, django_assert_max_num_queries):
    # Given a document
    collection, document_id, chunk_ids = cited_document

    # When an answer with three markers is recorded
    with django_assert_max_num_queries(5) as captured:
        _record(collection.id, document_id, [chunk_ids[:2], [chunk_ids[2]], [chunk_ids[3]]], message_id="msg_a")

    # Then the events and their chunk refs are one INSERT each
    inserts = [query["sql"] for query in captured.captured_queries if query["sql"].startswith("INSERT")]
    assert len(inserts) == 2
    assert (CitationEvent.objects.count(), CitationEventChunk.objects.count()) == (3, 4)


def _check_command() -> str:
    out = StringIO()
    call_command("citations_check", stdout=out)
    return out.getvalue().strip()


def test_the_check_command_agrees_with_the_log_right_after_events_are_written(cited_document, clock):
    # Given a slice closed over one answer
    collection, document_id, chunk_ids = cited_document
    _record_and_close(collection.id, document_id, [chunk_ids[:2]], clock=clock)

    # When another answer is written and the check command runs at once
    _record(collection.id, document_id, [[chunk_ids[0]], chunk_ids[2:]], message_id="msg_b")
    report = _check_command()

    # Then totals plus the live slice equal the log, and it says how much is still open
    first = CitationEvent.objects.get(message_id="msg_a").id
    assert report == f"ok: 3 events, closed slices through id {first}, 2 in the open slice"


def test_the_check_command_agrees_with_the_log_right_after_a_slice_closes(cited_document, clock):
    # Given answers in the open slice
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [chunk_ids[:2], [chunk_ids[3]]], message_id="msg_a")

    # When the hour ends, the slice closes and the check command runs at once
    clock.advance(hours=1)
    closed = citation_slices_close()
    report = _check_command()

    # Then everything is in closed slices and still equals the log
    assert report == f"ok: 2 events, closed slices through id {closed.closed_through}, 0 in the open slice"


def test_an_event_that_lands_below_the_boundary_is_caught_by_the_check(cited_document, clock):
    # Given a closed slice whose last event has id 5, leaving ids 2 to 4 unused
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [[chunk_ids[0]]], message_id="msg_a")
    late = CitationEvent.objects.get()
    CitationEvent.objects.create(
        id=late.id + 4, collection_id=collection.id, document_id=document_id, origin_kind="kb_chat",
        origin_id="chat_1", cited_by="alice", marker=1, message_id="msg_b",
    )  # fmt: skip
    clock.advance(hours=1)
    citation_slices_close()

    # When an event commits with an id inside the closed slice (what the writers' lock prevents)
    CitationEvent.objects.create(
        id=late.id + 2, collection_id=collection.id, document_id=document_id, origin_kind="kb_chat",
        origin_id="chat_1", cited_by="alice", marker=1, message_id="msg_c",
    )  # fmt: skip

    # Then the check names the counts it would miss
    check = citation_counts_check()
    assert check.mismatches == [
        f"collection {collection.id}: closed 2 + live 0 != log 3",
        f"document {document_id}: closed 2 + live 0 != log 3",
    ]


def test_a_slice_close_that_dies_halfway_changes_nothing(cited_document, alice_api, clock, monkeypatch):
    # Given answers in the open slice, and a close that dies after adding their aggregates
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [chunk_ids[:2]], message_id="msg_a")
    before = _counts(alice_api, collection.id, document_id)
    add_closed_slice = citation_services._add_closed_slice

    def dies_after_adding(**bounds):
        add_closed_slice(**bounds)
        raise RuntimeError("killed halfway")

    monkeypatch.setattr(citation_services, "_add_closed_slice", dies_after_adding)

    # When the worker closes the slice
    clock.advance(hours=1)
    with pytest.raises(RuntimeError):
        citation_slices_close()

    # Then neither totals nor the boundary moved, and every count is as before
    assert not CitationTotal.objects.exists()
    assert not CitationRollup.objects.filter(closed_through__gt=0).exists()  # the row may not exist at all
    assert _counts(alice_api, collection.id, document_id) == before
    assert citation_counts_check().ok


def test_a_rebuild_that_dies_halfway_keeps_the_totals(cited_document, alice_api, clock, monkeypatch):
    # Given a closed slice, and a rebuild that dies after deleting the totals
    collection, document_id, chunk_ids = cited_document
    _record_and_close(collection.id, document_id, [chunk_ids[:2]], clock=clock)
    totals = sorted(CitationTotal.objects.values_list("scope", "key", "cited"))

    def dies(**bounds):
        raise RuntimeError("killed halfway")

    monkeypatch.setattr(citation_services, "_add_closed_slice", dies)

    # When the rebuild command runs
    with pytest.raises(RuntimeError):
        call_command("citations_rebuild")

    # Then the totals are those of before, and they still equal the log
    assert sorted(CitationTotal.objects.values_list("scope", "key", "cited")) == totals
    assert _counts(alice_api, collection.id, document_id) == (1, 1, [1, 1, 0, 0])
    assert citation_counts_check().ok


def test_an_answer_whose_chunk_rows_fail_leaves_no_event(cited_document, monkeypatch):
    # Given chunk rows that cannot be written
    collection, document_id, chunk_ids = cited_document

    def fails(rows, **options):
        raise RuntimeError("killed between the two inserts")

    monkeypatch.setattr(CitationEventChunk.objects, "bulk_create", fails)

    # When an answer's citations are recorded
    with pytest.raises(RuntimeError):
        _record(collection.id, document_id, [[chunk_ids[0]]], message_id="msg_a")

    # Then its events went with them, and a retry later records it whole
    assert not CitationEvent.objects.exists()
    monkeypatch.undo()
    assert _record(collection.id, document_id, [[chunk_ids[0]]], message_id="msg_a") == 1
    assert CitationEventChunk.objects.count() == 1

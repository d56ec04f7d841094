"""Closed slices of the citation log: totals + live slice == the full log, at every moment."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from knowledge.answers import Citation
from knowledge.models import Chunk, CitationEvent, CitationEventChunk, CitationRollup, CitationTotal
from knowledge.selectors import citation_counts_check
from knowledge.services import citation_slices_close, citation_totals_rebuild, record_citations

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
    _record(collection.id, document_id, [[chunk_ids[0]]], message_id="msg_a")
    clock.advance(hours=1)
    citation_slices_close()

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
    _record(collection.id, document_id, [[chunk_ids[0]], [chunk_ids[1]]], message_id="msg_a")
    clock.advance(hours=1)
    citation_slices_close()

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
    _record(collection.id, document_id, [chunk_ids[:2]], message_id="msg_a")
    clock.advance(hours=1)
    citation_slices_close()

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
    _record(collection.id, document_id, [[chunk_ids[0]]], message_id="msg_a")
    clock.advance(hours=1)
    citation_slices_close()
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
    _record(collection.id, document_id, [[chunk_ids[0]]], message_id="msg_a")
    clock.advance(hours=1)
    citation_slices_close()
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

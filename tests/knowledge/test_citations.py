"""The citation log: counting rules of spec "Events" 3, replay safety, append-only, flat query counts."""

from __future__ import annotations

import pytest

from knowledge.answers import Citation
from knowledge.models import Chunk, CitationEvent, CitationEventChunk
from knowledge.services import record_citations

pytestmark = pytest.mark.django_db

TEXT = "\n\n".join(f"Part {n}. " + "Disk quota is checked when a file is written. " * 14 for n in range(4))


@pytest.fixture
def cited_document(make_collection, upload):
    collection = make_collection()
    document_id = upload(collection.id, "disk.txt", TEXT).json()["id"]
    chunk_ids = list(Chunk.objects.order_by("ordinal").values_list("id", flat=True))
    return collection, document_id, chunk_ids


def _record(
    collection_id, document_id, chunk_groups, *, message_id="msg_1", origin_kind="kb_chat", origin_id="origin_1"
):
    return record_citations(
        citations=[
            Citation(marker, collection_id, document_id, "disk.txt", tuple(chunks))
            for marker, chunks in enumerate(chunk_groups, start=1)
        ],
        origin_kind=origin_kind,
        origin_id=origin_id,
        cited_by="alice",
        message_id=message_id,
    )


def test_a_merged_marker_counts_once_for_the_document_and_once_per_chunk(cited_document, alice_api):
    # Given a document of four chunks
    collection, document_id, chunk_ids = cited_document

    # When one marker of an answer merges its first three chunks
    _record(collection.id, document_id, [chunk_ids[:3]])

    # Then the document and the collection count it once, and each merged chunk once
    assert alice_api.get(f"/kb/documents/{document_id}").json()["cited"] == 1
    counts = [chunk["cited"] for chunk in alice_api.get(f"/kb/documents/{document_id}/chunks").json()]
    assert counts == [1, 1, 1, 0]
    assert alice_api.get("/kb/collections").json()[0]["cited"] == 1


def test_two_markers_for_one_document_in_one_answer_count_twice(cited_document, alice_api):
    # Given a document
    collection, document_id, chunk_ids = cited_document

    # When one answer cites its first chunk under two markers
    _record(collection.id, document_id, [[chunk_ids[0]], [chunk_ids[0]]])

    # Then nothing is de-duplicated: the document, the chunk and the collection count two
    assert alice_api.get(f"/kb/documents/{document_id}").json()["cited"] == 2
    assert alice_api.get(f"/kb/documents/{document_id}/chunks").json()[0]["cited"] == 2
    assert alice_api.get("/kb/collections").json()[0]["cited"] == 2


def test_document_cited_never_exceeds_the_sum_of_its_chunk_counts(cited_document, alice_api):
    # Given two answers citing a document with markers of one to four chunks
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [chunk_ids[:2], chunk_ids[2:], [chunk_ids[1]]], message_id="a")
    _record(collection.id, document_id, [chunk_ids], message_id="b")

    # When the document and its chunks are read
    document = alice_api.get(f"/kb/documents/{document_id}").json()
    chunks = alice_api.get(f"/kb/documents/{document_id}/chunks").json()

    # Then the document counts one per marker and its chunks one per chunk of each marker
    assert document["cited"] == 4
    assert sum(chunk["cited"] for chunk in chunks) == 9


def test_replaying_a_write_does_not_count_twice(cited_document, alice_api):
    # Given a document
    collection, document_id, chunk_ids = cited_document

    # When the citations of one answer are recorded twice
    first = _record(collection.id, document_id, [[chunk_ids[0]], [chunk_ids[1]]])
    replay = _record(collection.id, document_id, [[chunk_ids[0]], [chunk_ids[1]]])

    # Then the replay adds no event and no chunk row
    assert (first, replay) == (2, 0)
    assert CitationEvent.objects.count() == 2
    assert CitationEventChunk.objects.count() == 2


def test_a_partial_replay_adds_only_the_missing_markers(cited_document):
    # Given an answer whose marker 1 is recorded
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [[chunk_ids[0]]])

    # When the answer is recorded again with markers 1 and 2
    added = _record(collection.id, document_id, [[chunk_ids[0]], [chunk_ids[1]]])

    # Then only marker 2 is new
    assert added == 1
    assert sorted(CitationEvent.objects.values_list("marker", flat=True)) == [1, 2]


def test_a_replay_citing_other_chunks_keeps_the_first_recording(cited_document, alice_api):
    # Given marker 1 of an answer, recorded citing the first chunk
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [[chunk_ids[0]]])

    # When the same origin, answer and marker are recorded again citing the second chunk
    added = _record(collection.id, document_id, [[chunk_ids[1]]])

    # Then the first recording stands: no event is added and the second chunk stays uncited
    counts = [chunk["cited"] for chunk in alice_api.get(f"/kb/documents/{document_id}/chunks").json()]
    assert added == 0
    assert counts == [1, 0, 0, 0]
    assert alice_api.get(f"/kb/documents/{document_id}").json()["cited"] == 1


def test_one_answer_id_under_two_origins_is_two_answers(cited_document, alice_api):
    # Given marker 1 of answer "msg_1" recorded by a chat
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [[chunk_ids[0]]], origin_id="chat_1")

    # When an investigation records marker 1 of an answer it also calls "msg_1"
    added = _record(collection.id, document_id, [[chunk_ids[0]]], origin_kind="rca", origin_id="inv_1")

    # Then an event's identity is origin, answer and marker: both count
    assert added == 1
    assert alice_api.get(f"/kb/documents/{document_id}").json()["cited"] == 2


def test_investigation_citations_are_recorded_with_the_rca_origin(cited_document, alice_api):
    # Given a document
    collection, document_id, chunk_ids = cited_document

    # When an investigation's answer cites it
    _record(collection.id, document_id, [[chunk_ids[0]]], origin_kind="rca")

    # Then the event carries the rca origin and its asker, and counts like any other
    event = CitationEvent.objects.get()
    assert (event.origin_kind, event.origin_id, event.cited_by) == ("rca", "origin_1", "alice")
    assert alice_api.get(f"/kb/documents/{document_id}").json()["cited"] == 1


def test_an_unknown_origin_kind_is_a_programming_error(cited_document):
    # Given a document
    collection, document_id, chunk_ids = cited_document

    # When citations are recorded for an origin kind the spec does not name, then it raises
    with pytest.raises(ValueError, match="origin_kind"):
        _record(collection.id, document_id, [[chunk_ids[0]]], origin_kind="email")


def test_events_record_the_time_from_the_service_clock(cited_document, clock):
    # Given a document and a clock standing still
    collection, document_id, chunk_ids = cited_document

    # When an answer cites it
    _record(collection.id, document_id, [[chunk_ids[0]]])

    # Then the event's time is the clock's
    assert CitationEvent.objects.get().created_at == clock.current


def test_citation_events_cannot_be_updated(cited_document):
    # Given a recorded event
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [[chunk_ids[0]]])
    event = CitationEvent.objects.get()

    # When it is updated in bulk or saved changed, then both raise
    with pytest.raises(TypeError):
        CitationEvent.objects.update(marker=5)
    event.marker = 5
    with pytest.raises(TypeError):
        event.save()


def test_citation_events_cannot_be_deleted(cited_document):
    # Given a recorded event
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [[chunk_ids[0]]])

    # When events or their chunk rows are deleted in bulk or one by one, then each raises
    with pytest.raises(TypeError):
        CitationEvent.objects.all().delete()
    with pytest.raises(TypeError):
        CitationEvent.objects.get().delete()
    with pytest.raises(TypeError):
        CitationEventChunk.objects.all().delete()
    # Then the event is still there
    assert CitationEvent.objects.count() == 1


def test_document_list_is_a_fixed_number_of_queries(make_collection, upload, alice_api, django_assert_max_num_queries):
    # Given a collection of 25 documents, each cited once
    collection = make_collection()
    for number in range(25):
        document_id = upload(collection.id, f"doc{number:02}.txt", f"Document {number} about quotas.").json()["id"]
        chunk_id = Chunk.objects.get(document_id=document_id).id
        record_citations(
            citations=[Citation(1, collection.id, document_id, "x", (chunk_id,))],
            origin_kind="kb_chat",
            origin_id="chat_1",
            cited_by="alice",
            message_id=f"msg_{number}",
        )

    # When its document list is read
    with django_assert_max_num_queries(2):
        rows = alice_api.get(f"/kb/collections/{collection.id}/documents").json()

    # Then two statements bring every document with its counts
    assert len(rows) == 25
    assert {row["cited"] for row in rows} == {1}
    assert {row["chunks"] for row in rows} == {1}

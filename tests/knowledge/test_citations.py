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


def _record(collection_id, document_id, chunk_groups, *, message_id="msg_1", origin_kind="kb_chat"):
    return record_citations(
        citations=[
            Citation(marker, collection_id, document_id, "disk.txt", tuple(chunks))
            for marker, chunks in enumerate(chunk_groups, start=1)
        ],
        origin_kind=origin_kind,
        origin_id="origin_1",
        cited_by="alice",
        message_id=message_id,
    )


def test_a_merged_marker_counts_once_for_the_document_and_once_per_chunk(cited_document, alice_api):
    collection, document_id, chunk_ids = cited_document

    _record(collection.id, document_id, [chunk_ids[:3]])

    assert alice_api.get(f"/kb/documents/{document_id}").json()["cited"] == 1
    counts = [chunk["cited"] for chunk in alice_api.get(f"/kb/documents/{document_id}/chunks").json()]
    assert counts == [1, 1, 1, 0]
    assert alice_api.get("/kb/collections").json()[0]["cited"] == 1


def test_two_markers_for_one_document_in_one_answer_count_twice(cited_document, alice_api):
    collection, document_id, chunk_ids = cited_document

    _record(collection.id, document_id, [[chunk_ids[0]], [chunk_ids[0]]])

    assert alice_api.get(f"/kb/documents/{document_id}").json()["cited"] == 2
    assert alice_api.get(f"/kb/documents/{document_id}/chunks").json()[0]["cited"] == 2
    assert alice_api.get("/kb/collections").json()[0]["cited"] == 2


def test_document_cited_never_exceeds_the_sum_of_its_chunk_counts(cited_document, alice_api):
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [chunk_ids[:2], chunk_ids[2:], [chunk_ids[1]]], message_id="a")
    _record(collection.id, document_id, [chunk_ids], message_id="b")

    document = alice_api.get(f"/kb/documents/{document_id}").json()
    chunks = alice_api.get(f"/kb/documents/{document_id}/chunks").json()

    assert document["cited"] == 4
    assert sum(chunk["cited"] for chunk in chunks) == 9


def test_replaying_a_write_does_not_count_twice(cited_document, alice_api):
    collection, document_id, chunk_ids = cited_document

    first = _record(collection.id, document_id, [[chunk_ids[0]], [chunk_ids[1]]])
    replay = _record(collection.id, document_id, [[chunk_ids[0]], [chunk_ids[1]]])

    assert (first, replay) == (2, 0)
    assert CitationEvent.objects.count() == 2
    assert CitationEventChunk.objects.count() == 2


def test_a_partial_replay_adds_only_the_missing_markers(cited_document):
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [[chunk_ids[0]]])

    added = _record(collection.id, document_id, [[chunk_ids[0]], [chunk_ids[1]]])

    assert added == 1
    assert sorted(CitationEvent.objects.values_list("marker", flat=True)) == [1, 2]


def test_investigation_citations_are_recorded_with_the_rca_origin(cited_document, alice_api):
    collection, document_id, chunk_ids = cited_document

    _record(collection.id, document_id, [[chunk_ids[0]]], origin_kind="rca")

    event = CitationEvent.objects.get()
    assert (event.origin_kind, event.origin_id, event.cited_by) == ("rca", "origin_1", "alice")
    assert alice_api.get(f"/kb/documents/{document_id}").json()["cited"] == 1


def test_an_unknown_origin_kind_is_a_programming_error(cited_document):
    collection, document_id, chunk_ids = cited_document

    with pytest.raises(ValueError, match="origin_kind"):
        _record(collection.id, document_id, [[chunk_ids[0]]], origin_kind="email")


def test_events_record_the_time_from_the_service_clock(cited_document, clock):
    collection, document_id, chunk_ids = cited_document

    _record(collection.id, document_id, [[chunk_ids[0]]])

    assert CitationEvent.objects.get().created_at == clock.current


def test_citation_events_cannot_be_updated(cited_document):
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [[chunk_ids[0]]])
    event = CitationEvent.objects.get()

    with pytest.raises(TypeError):
        CitationEvent.objects.update(marker=5)
    event.marker = 5
    with pytest.raises(TypeError):
        event.save()


def test_citation_events_cannot_be_deleted(cited_document):
    collection, document_id, chunk_ids = cited_document
    _record(collection.id, document_id, [[chunk_ids[0]]])

    with pytest.raises(TypeError):
        CitationEvent.objects.all().delete()
    with pytest.raises(TypeError):
        CitationEvent.objects.get().delete()
    with pytest.raises(TypeError):
        CitationEventChunk.objects.all().delete()
    assert CitationEvent.objects.count() == 1


def test_document_list_is_a_fixed_number_of_queries(make_collection, upload, alice_api, django_assert_max_num_queries):
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

    with django_assert_max_num_queries(2):
        rows = alice_api.get(f"/kb/collections/{collection.id}/documents").json()

    assert len(rows) == 25
    assert {row["cited"] for row in rows} == {1}
    assert {row["chunks"] for row in rows} == {1}

"""Chunk lists: both spellings of the path, per-chunk `cited`, bad input, a fixed query count."""

from __future__ import annotations

import pytest

from knowledge.answers import Citation
from knowledge.models import Chunk
from knowledge.services import record_citations

pytestmark = pytest.mark.django_db

TEXT = "\n\n".join(f"Section {n}. " + "Sandboxes hold quota while they are alive. " * 15 for n in range(5))


def test_query_and_path_forms_return_the_same_chunks(make_collection, upload, alice_api):
    # Given a document of several chunks
    document_id = upload(make_collection().id, "notes.txt", TEXT).json()["id"]

    # When alice lists its chunks by the query form and the path form
    by_query = alice_api.get(f"/kb/documents/chunks?id={document_id}").json()
    by_path = alice_api.get(f"/kb/documents/{document_id}/chunks").json()

    # Then both return the same chunks in order, each of this document and cited zero times
    assert by_query == by_path
    assert [chunk["ordinal"] for chunk in by_path] == list(range(len(by_path)))
    assert all(chunk["document_id"] == document_id and chunk["cited"] == 0 for chunk in by_path)


def test_chunk_query_without_an_id_is_refused(alice_api):
    # Given alice, and the query form of the chunk list, which needs an id
    # When she asks the query form for chunks without an id
    response = alice_api.get("/kb/documents/chunks")

    # Then it is 400 validation_error
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"


def test_chunks_of_an_unknown_document_are_404(alice_api):
    # Given no such document
    # When alice asks for its chunks by the query form / Then it is 404
    assert alice_api.get("/kb/documents/chunks?id=doc_missing").status_code == 404
    # When she asks by the path form / Then it is 404 too
    assert alice_api.get("/kb/documents/doc_missing/chunks").status_code == 404


def test_chunk_cited_counts_every_event_naming_the_chunk(make_collection, upload, alice_api):
    # Given a document's first three chunks, and an answer whose marker 1 cites the first two and marker 2 the second
    collection = make_collection()
    document_id = upload(collection.id, "notes.txt", TEXT).json()["id"]
    first, second, third = Chunk.objects.order_by("ordinal").values_list("id", flat=True)[:3]
    record_citations(
        citations=[
            Citation(1, collection.id, document_id, "notes.txt", (first, second)),
            Citation(2, collection.id, document_id, "notes.txt", (second,)),
        ],
        origin_kind="kb_chat",
        origin_id="chat_1",
        cited_by="alice",
        message_id="msg_1",
    )

    # When alice lists its chunks
    counts = {chunk["id"]: chunk["cited"] for chunk in alice_api.get(f"/kb/documents/{document_id}/chunks").json()}

    # Then each chunk counts the events that name it: 1, 2 and 0
    assert (counts[first], counts[second], counts[third]) == (1, 2, 0)


def test_chunk_list_is_a_fixed_number_of_queries(make_collection, upload, alice_api, django_assert_max_num_queries):
    # Given a document of twenty chunks or more, each cited once
    collection = make_collection()
    document_id = upload(collection.id, "notes.txt", TEXT * 4).json()["id"]
    chunk_ids = list(Chunk.objects.values_list("id", flat=True))
    assert len(chunk_ids) >= 20
    for number, chunk_id in enumerate(chunk_ids):
        record_citations(
            citations=[Citation(1, collection.id, document_id, "notes.txt", (chunk_id,))],
            origin_kind="rca",
            origin_id="inv_1",
            cited_by="bob",
            message_id=f"msg_{number}",
        )

    # When alice lists its chunks
    with django_assert_max_num_queries(2):
        chunks = alice_api.get(f"/kb/documents/{document_id}/chunks").json()

    # Then each shows one citation, in a fixed number of queries
    assert [chunk["cited"] for chunk in chunks] == [1] * len(chunk_ids)

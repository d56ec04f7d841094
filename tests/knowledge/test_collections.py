"""Collections: create, list with `cited`, bad input, and a list that costs the same at any length."""

from __future__ import annotations

import pytest

from knowledge.answers import Citation
from knowledge.models import Collection
from knowledge.services import record_citations

pytestmark = pytest.mark.django_db


def test_creating_a_collection_returns_it_with_zero_cited(alice_api):
    # Given alice, with no collection yet
    # When she creates the collection Runbooks
    response = alice_api.post("/kb/collections", {"name": "Runbooks", "description": "How we operate"}, format="json")

    # Then it is 201, hers, with nothing cited and no document yet
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "Runbooks"
    assert body["owner"] == "alice"
    assert body["cited"] == 0
    assert body["documents"] == 0
    assert body["id"] == Collection.objects.get().id


def test_creating_a_collection_without_a_name_is_refused_and_stores_nothing(alice_api):
    # Given alice, with no collection yet
    # When she creates a collection with a blank name
    response = alice_api.post("/kb/collections", {"name": "  "}, format="json")

    # Then it is 400 validation_error and nothing is stored
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert not Collection.objects.exists()


def test_creating_a_collection_needs_an_identity(client, acting_as):
    # Given nobody signed in
    acting_as(None)

    # When a collection is created
    response = client.post("/kb/collections", {"name": "x"}, content_type="application/json")

    # Then it is 401 and nothing is stored
    assert response.status_code == 401
    assert not Collection.objects.exists()


def test_collection_list_counts_one_citation_per_event(alice_api, handbook):
    # Given the handbook, whose quotas.md was cited in two answers, each citing all its chunks under one marker
    document = handbook.documents.get(filename="quotas.md")
    chunk_ids = list(document.chunk_rows.values_list("id", flat=True))
    for message in ("m1", "m2"):
        record_citations(
            citations=[Citation(1, handbook.id, document.id, document.filename, tuple(chunk_ids))],
            origin_kind="kb_chat",
            origin_id="chat_x",
            cited_by="alice",
            message_id=message,
        )

    # When the collections are listed
    rows = alice_api.get("/kb/collections").json()

    # Then the handbook counts two citations, one per event, and its two documents
    assert [(row["name"], row["cited"], row["documents"]) for row in rows] == [("Operations handbook", 2, 2)]


def test_collection_list_is_a_fixed_number_of_queries(alice_api, make_collection, django_assert_max_num_queries):
    # Given thirty collections
    for number in range(30):
        make_collection(f"Collection {number:02}")

    # When alice lists them
    with django_assert_max_num_queries(2):
        rows = alice_api.get("/kb/collections").json()

    # Then all thirty come back in a fixed number of queries
    assert len(rows) == 30


@pytest.mark.postgres(reason="SQLite stores NUL characters; only PostgreSQL refuses them")
def test_a_nul_character_in_a_collection_id_is_a_400_not_a_server_error(alice_api):
    # Found while fuzzing on PostgreSQL: a NUL in a path id reached the database and answered 500.
    # Given PostgreSQL, which cannot store a NUL character

    # When alice asks for the documents of a collection whose id holds one
    response = alice_api.get("/kb/collections/a%00b/documents")

    # Then it is 400 invalid_value, not a server error
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_value"

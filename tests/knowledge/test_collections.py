"""Collections: create, list with `cited`, bad input, and a list that costs the same at any length."""

from __future__ import annotations

import pytest

from knowledge.answers import Citation
from knowledge.models import Collection
from knowledge.services import record_citations

pytestmark = pytest.mark.django_db


def test_creating_a_collection_returns_it_with_zero_cited(alice_api):
    response = alice_api.post("/kb/collections", {"name": "Runbooks", "description": "How we operate"}, format="json")

    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "Runbooks"
    assert body["owner"] == "alice"
    assert body["cited"] == 0
    assert body["documents"] == 0
    assert body["id"] == Collection.objects.get().id


def test_creating_a_collection_without_a_name_is_refused_and_stores_nothing(alice_api):
    response = alice_api.post("/kb/collections", {"name": "  "}, format="json")

    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert not Collection.objects.exists()


def test_creating_a_collection_needs_an_identity(client, acting_as):
    acting_as(None)

    response = client.post("/kb/collections", {"name": "x"}, content_type="application/json")

    assert response.status_code == 401
    assert not Collection.objects.exists()


def test_collection_list_counts_one_citation_per_event(alice_api, handbook):
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

    rows = alice_api.get("/kb/collections").json()

    assert [(row["name"], row["cited"], row["documents"]) for row in rows] == [("Operations handbook", 2, 2)]


def test_collection_list_is_a_fixed_number_of_queries(alice_api, make_collection, django_assert_max_num_queries):
    for number in range(30):
        make_collection(f"Collection {number:02}")

    with django_assert_max_num_queries(2):
        rows = alice_api.get("/kb/collections").json()

    assert len(rows) == 30


@pytest.mark.postgres
def test_a_nul_character_in_a_collection_id_is_a_400_not_a_server_error(alice_api):
    # Found while fuzzing on PostgreSQL: a NUL in a path id reached the database and answered 500.
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("SQLite stores NUL characters")

    response = alice_api.get("/kb/collections/a%00b/documents")

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_value"

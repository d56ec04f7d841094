"""Deleting documents and collections in admin goes through the services: chunks and search-index rows go with them."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from knowledge.models import Chunk, Collection, Document
from knowledge.search import get_chunk_index

pytestmark = pytest.mark.django_db


def _found(question: str, collection_id: str) -> list:
    return get_chunk_index().search(question=question, collection_ids=[collection_id], limit=5)


def test_deleting_a_document_in_admin_drops_its_chunks_and_index_rows(admin_client_logged_in, handbook):
    # Given a ready document whose passages the search finds
    document = Document.objects.get(collection=handbook, filename="quotas.md")
    assert _found("evicted", handbook.id)

    # When staff delete it in admin
    response = admin_client_logged_in.post(
        reverse("admin:knowledge_document_delete", args=[quote(document.pk)]), {"post": "yes"}
    )

    # Then the document, its chunks and its index rows are gone
    assert response.status_code == 302
    assert not Document.objects.filter(pk=document.pk).exists()
    assert not Chunk.objects.filter(document_id=document.pk).exists()
    assert _found("evicted", handbook.id) == []


def test_deleting_documents_with_the_admin_action_drops_their_index_rows(admin_client_logged_in, handbook):
    # Given the handbook's documents
    ids = list(Document.objects.filter(collection=handbook).values_list("pk", flat=True))

    # When staff delete them all with the list's delete action
    admin_client_logged_in.post(
        reverse("admin:knowledge_document_changelist"),
        {"action": "delete_selected", "_selected_action": ids, "post": "yes"},
    )

    # Then nothing of them is left to find
    assert not Document.objects.exists()
    assert _found("sandbox share", handbook.id) == []


def test_deleting_a_collection_in_admin_takes_its_documents_and_index_rows(admin_client_logged_in, handbook):
    # Given the handbook, whose documents protect it from a plain delete
    url = reverse("admin:knowledge_collection_delete", args=[quote(handbook.pk)])

    # When staff delete it in admin
    response = admin_client_logged_in.post(url, {"post": "yes"})

    # Then it is gone with its documents, chunks and index rows
    assert response.status_code == 302
    assert not Collection.objects.exists()
    assert not Chunk.objects.exists()
    assert _found("evicted", handbook.id) == []

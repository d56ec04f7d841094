"""Editing documents in admin goes through the services: a rename keeps the writers' rules, and
the collection, content and status stay the upload's and ingest's."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from knowledge.models import Chunk, Document

pytestmark = pytest.mark.django_db


def _change_url(document: Document) -> str:
    return reverse("admin:knowledge_document_change", args=[quote(document.pk)])


def test_staff_rename_a_document_in_admin_and_are_its_last_editor(admin_client_logged_in, handbook):
    # Given one of the handbook's documents
    document = Document.objects.get(collection=handbook, filename="quotas.md")

    # When staff rename it in admin
    response = admin_client_logged_in.post(_change_url(document), {"filename": "limits.md"})

    # Then it has the new name, staff are its last editor, and its passages stay searchable under it
    assert response.status_code == 302
    document.refresh_from_db()
    assert (document.filename, document.updated_by) == ("limits.md", "root")
    assert Chunk.objects.filter(document=document).exists()


def test_a_name_another_document_has_is_refused_in_admin_and_nothing_changes(admin_client_logged_in, handbook):
    # Given two documents of the handbook
    document = Document.objects.get(collection=handbook, filename="quotas.md")
    other = Document.objects.filter(collection=handbook).exclude(pk=document.pk).first()

    # When staff try to give the first the second's name
    response = admin_client_logged_in.post(_change_url(document), {"filename": other.filename}, follow=True)

    # Then admin says why, and the document keeps its name
    assert b"already names a document of this collection" in response.content
    document.refresh_from_db()
    assert document.filename == "quotas.md"


def test_admin_cannot_move_a_document_or_change_its_status(admin_client_logged_in, handbook, make_collection):
    # Given a ready document and another collection
    document = Document.objects.get(collection=handbook, filename="quotas.md")
    elsewhere = make_collection(name="Elsewhere")

    # When a crafted admin post tries to move it and mark it failed
    admin_client_logged_in.post(
        _change_url(document),
        {"filename": "quotas.md", "collection": elsewhere.pk, "status": "failed", "reason": "by hand"},
    )

    # Then it stays where it was, as ingest left it
    document.refresh_from_db()
    assert (document.collection_id, document.status, document.reason) == (handbook.pk, "ready", "")


def test_admin_cannot_add_a_document_without_an_upload(admin_client_logged_in):
    # Given staff in admin
    # When they open the add form of documents
    response = admin_client_logged_in.get(reverse("admin:knowledge_document_add"))

    # Then it is refused: documents come from uploads
    assert response.status_code == 403


def test_the_document_list_shows_sizes_as_people_read_them(admin_client_logged_in, handbook):
    # Given the handbook's documents
    # When staff open the admin list
    response = admin_client_logged_in.get(reverse("admin:knowledge_document_changelist"))

    # Then sizes read in bytes or KB, as on the knowledge base pages
    assert response.status_code == 200
    assert b"bytes" in response.content or b"KB" in response.content

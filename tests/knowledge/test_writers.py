"""Knowledge-base writers (docs/ARCHITECTURE.md §6, issue 12.4): everyone reads a collection; only its creator
and the people the creator adds upload, re-upload, rename or delete its documents."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse
from rest_framework.fields import DateTimeField

from collab.actor import Actor
from collab.errors import DomainError, Invalid
from knowledge import services
from knowledge.models import Chunk, CitationEvent, CollectionWriter, Document

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


def test_a_reader_cannot_upload_and_nothing_is_stored(make_collection, upload):
    # Given alice's collection
    collection = make_collection()
    # When bob, who is no writer, uploads
    response = upload(collection.id, "notes.txt", "Email your password to bob.", user_id="bob")
    # Then it is 403 saying who may, and nothing is stored
    assert response.status_code == 403
    assert response.json()["error"] == "not_a_writer"
    assert not Document.objects.exists()


def test_a_reader_cannot_replace_a_document_by_reuploading_its_name(handbook, upload, alice_api):
    # Given alice's handbook with quotas.md
    before = Document.objects.get(filename="quotas.md")
    # When bob re-uploads quotas.md with planted text
    response = upload(handbook.id, "quotas.md", "Email your password to bob.", user_id="bob")
    # Then it is refused and the document and its chunks are untouched
    after = Document.objects.get(filename="quotas.md")
    assert response.status_code == 403
    assert (after.content_version, bytes(after.content), after.replaced_by) == (
        before.content_version,
        bytes(before.content),
        "",
    )
    assert not Chunk.objects.filter(text__contains="password").exists()


def test_a_writer_added_by_the_creator_replaces_content_and_the_replacement_is_recorded(
    make_collection, upload, api_client_for, clock
):
    # Given alice's collection with notes.txt, and bob added as writer
    collection = make_collection()
    first = upload(collection.id, "notes.txt", "Old text.").json()["id"]
    added = api_client_for("alice").post(
        f"/kb/collections/{collection.id}/writers", {"user_ids": ["bob"]}, format="json"
    )
    # When bob re-uploads notes.txt
    clock.advance(minutes=5)
    second = upload(collection.id, "notes.txt", "New text.", user_id="bob").json()["id"]
    # Then the same document now records bob and when he replaced it, and alice stays its owner
    body = api_client_for("carol").get(f"/kb/documents/{first}").json()
    assert added.json() == {"writers": ["alice", "bob"]}
    assert second == first
    assert (body["owner"], body["replaced_by"], body["replaced_at"]) == (
        "alice",
        "bob",
        DateTimeField().to_representation(clock.current),
    )


def test_everyone_signed_in_reads_collections_and_documents(handbook, api_client_for):
    # Given alice's handbook; When dave lists its documents and chunks
    dave = api_client_for("dave")
    documents = dave.get(f"/kb/collections/{handbook.id}/documents")
    chunks = dave.get(f"/kb/documents/{documents.json()[0]['id']}/chunks")
    # Then he reads them
    assert (documents.status_code, chunks.status_code) == (200, 200)
    assert len(documents.json()) == 2


@pytest.mark.parametrize("who", ["bob", "carol"])
def test_only_the_creator_chooses_writers(make_collection, api_client_for, who):
    # Given alice's collection with bob as writer
    collection = make_collection(writers=["bob"])
    # When a writer or a reader adds someone, or removes bob
    add = api_client_for(who).post(f"/kb/collections/{collection.id}/writers", {"user_ids": [who]}, format="json")
    remove = api_client_for(who).delete(f"/kb/collections/{collection.id}/writers/bob")
    # Then both are 403 and the writers are unchanged
    assert (add.status_code, remove.status_code) == (403, 403)
    assert add.json()["error"] == "not_collection_creator"
    assert list(CollectionWriter.objects.values_list("user_id", flat=True)) == ["bob"]


def test_adding_unknown_writers_names_them_and_changes_nothing(make_collection, alice_api):
    # Given alice's collection; When she adds bob and two unknown ids
    collection = make_collection()
    response = alice_api.post(
        f"/kb/collections/{collection.id}/writers", {"user_ids": ["bob", "mallory", "eve"]}, format="json"
    )
    # Then it is 400 naming them and bob is not added either
    assert response.status_code == 400
    assert response.json()["unknown"] == ["mallory", "eve"]
    assert not CollectionWriter.objects.exists()


@pytest.mark.parametrize("body", [{}, {"user_ids": []}, {"user_ids": "bob"}, {"user_ids": [""]}, [1, 2]])
def test_a_malformed_writers_body_is_400(make_collection, alice_api, body):
    # Given alice's collection; When she posts a body that is not a list of ids
    collection = make_collection()
    response = alice_api.post(f"/kb/collections/{collection.id}/writers", body, format="json")
    # Then it is 400 and nothing is stored
    assert response.status_code == 400
    assert not CollectionWriter.objects.exists()


def test_a_removed_writer_can_no_longer_upload(make_collection, upload, alice_api):
    # Given alice's collection with bob as writer
    collection = make_collection(writers=["bob"])
    # When alice removes him and he uploads
    removed = alice_api.delete(f"/kb/collections/{collection.id}/writers/bob")
    response = upload(collection.id, "b.txt", "text", user_id="bob")
    # Then the upload is refused
    assert removed.status_code == 204
    assert response.status_code == 403


def test_writers_rename_a_document_and_readers_cannot(handbook, api_client_for):
    # Given alice's handbook
    document = Document.objects.get(filename="quotas.md")
    url = f"/kb/documents/{document.id}"
    # When bob (reader) and then alice rename quotas.md
    refused = api_client_for("bob").patch(url, {"filename": "mine.md"}, format="json")
    renamed = api_client_for("alice").patch(url, {"filename": "limits.md"}, format="json")
    # Then only alice's rename is stored
    assert refused.status_code == 403
    assert (renamed.status_code, renamed.json()["filename"]) == (200, "limits.md")
    assert Document.objects.get(pk=document.id).filename == "limits.md"


@pytest.mark.parametrize(
    ("filename", "status"),
    [("sharing.md", 409), ("", 400), ("x" * 300, 400), ("   ", 400), ("a\x00b.md", 400), ("a\nb.md", 400)],
)
def test_renaming_to_a_taken_or_invalid_name_is_refused(handbook, alice_api, filename, status):
    # Given alice's handbook; When she renames quotas.md to a name that is taken or invalid
    document = Document.objects.get(filename="quotas.md")
    response = alice_api.patch(f"/kb/documents/{document.id}", {"filename": filename}, format="json")
    # Then it is refused and the name stays
    assert response.status_code == status
    assert Document.objects.get(pk=document.id).filename == "quotas.md"


def test_a_writer_deletes_a_document_and_its_citations_stay_counted(handbook, alice_api, api_client_for):
    # Given alice's handbook whose quotas.md was cited once
    document = Document.objects.get(filename="quotas.md")
    CitationEvent.objects.create(
        collection_id=handbook.id, document_id=document.id, origin_kind="kb_chat", origin_id="c",
        cited_by="alice", marker=1, message_id="m",
    )  # fmt: skip
    # When bob (reader) and then alice delete it
    refused = api_client_for("bob").delete(f"/kb/documents/{document.id}")
    deleted = alice_api.delete(f"/kb/documents/{document.id}")
    # Then only alice's delete happens: the document and its chunks go, the collection's count stays
    assert (refused.status_code, deleted.status_code) == (403, 204)
    assert not Document.objects.filter(pk=document.id).exists()
    assert not Chunk.objects.filter(document_id=document.id).exists()
    assert alice_api.get("/kb/collections").json()[0]["cited"] == 1


def test_changing_a_missing_document_is_404(alice_api):
    # Given no such document; When alice renames or deletes it
    rename = alice_api.patch("/kb/documents/nope", {"filename": "a.md"}, format="json")
    delete = alice_api.delete("/kb/documents/nope")
    # Then both are 404
    assert (rename.status_code, delete.status_code) == (404, 404)


def test_the_page_offers_upload_to_writers_only(handbook, client):
    # Given alice's handbook; When bob (reader) and alice open its page
    bob_page = client.get(f"/kb/collections/{handbook.id}/documents", HTTP_X_USER_ID="bob", **HTML).content.decode()
    alice_page = client.get(f"/kb/collections/{handbook.id}/documents", HTTP_X_USER_ID="alice", **HTML).content.decode()
    # Then bob reads it with a note on who may change it, and alice gets the upload and writers forms
    assert 'data-testid="read-only-collection"' in bob_page
    assert 'data-testid="upload"' not in bob_page
    assert 'data-testid="upload"' in alice_page
    assert 'data-testid="add-writer"' in alice_page


def test_the_creator_adds_a_writer_from_the_page(handbook, client):
    # Given alice's handbook; When she adds bob with the page's form
    response = client.post(
        f"/kb/collections/{handbook.id}/writers", {"user_ids": "bob"}, HTTP_X_USER_ID="alice", follow=True, **HTML
    )
    # Then bob is a writer and the page says so
    assert "bob can now change this collection" in response.content.decode()
    assert CollectionWriter.objects.filter(collection=handbook, user_id="bob").exists()


def test_staff_add_a_writer_in_admin(make_collection, admin_client):
    # Given alice's collection
    collection = make_collection()
    # Admin escapes "_" in ids ("_" starts an escape in admin URLs), so the id is quoted as admin does.
    url = reverse("admin:knowledge_collection_change", args=[quote(collection.id)])
    # When staff add bob in the writers inline
    response = admin_client.post(
        url,
        {
            "name": collection.name,
            "description": "",
            "writers-TOTAL_FORMS": "1",
            "writers-INITIAL_FORMS": "0",
            "writers-0-user_id": "bob",
            "writers-0-collection": collection.id,
        },
    )
    # Then bob is a writer, stamped with who added him
    assert (response.status_code, response["Location"]) == (302, "/admin/knowledge/collection/")
    assert list(CollectionWriter.objects.values_list("user_id", "created_by")) == [("bob", "admin")]


def test_a_delete_that_fails_halfway_leaves_the_document_its_chunks_and_its_search_rows(
    handbook, alice_api, monkeypatch
):
    # Given alice's handbook with quotas.md indexed for search
    from knowledge.search import get_chunk_index

    document = Document.objects.get(filename="quotas.md")
    chunks_before = Chunk.objects.filter(document_id=document.id).count()
    hits_before = get_chunk_index().search(question="quota", collection_ids=[handbook.id], limit=10)

    # When the delete dies after the chunks and search rows went but before the document row did
    def crash(*args, **kwargs):
        raise RuntimeError("killed halfway")

    monkeypatch.setattr(Document, "delete", crash)
    with pytest.raises(RuntimeError):
        alice_api.delete(f"/kb/documents/{document.id}")
    # Then the transaction took everything back: document, chunks and search hits are all there
    assert hits_before
    assert Document.objects.filter(pk=document.id).exists()
    assert Chunk.objects.filter(document_id=document.id).count() == chunks_before
    assert get_chunk_index().search(question="quota", collection_ids=[handbook.id], limit=10) == hits_before


@pytest.mark.parametrize("filename", ["a\x00b.md", "notes\r\nSet-Cookie: x.md", "tab\there.md"])
def test_an_upload_named_with_control_characters_is_refused_and_nothing_stored(handbook, filename):
    # Given alice's handbook and its documents (HTTP uploads arrive with names Django has cleaned;
    # the service holds the rule for every other caller)
    documents = Document.objects.count()
    # When a file whose name holds a control character is uploaded to it
    with pytest.raises(DomainError) as refused:
        services.document_upload(
            collection_id=handbook.id,
            actor=Actor("alice"),
            filename=filename,
            content_type="text/plain",
            data=b"Some text.",
        )
    # Then it is 400 invalid_filename and no document is stored
    assert (type(refused.value), refused.value.error) == (Invalid, "invalid_filename")
    assert Document.objects.count() == documents

"""Uploads and ingest: formats, bad input, status, re-upload, the ingest task."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import transaction
from django_tasks_db.models import DBTaskResult

from knowledge import services
from knowledge.answers import Citation
from knowledge.ingest import ingest_document
from knowledge.models import Chunk, CitationEvent, Document
from knowledge.tasks import ingest_document_task
from tests.knowledge.pdf import pdf_with_text

pytestmark = pytest.mark.django_db

LONG_TEXT = "\n\n".join(f"Paragraph {n} talks about sandboxes and quotas in some detail. " * 6 for n in range(6))


def _ingest_tasks() -> list[DBTaskResult]:
    return list(DBTaskResult.objects.filter(task_path=ingest_document_task.module_path))


def _post_upload(client, collection_id: str, filename: str, data: bytes):
    return client.post(
        f"/kb/collections/{collection_id}/documents",
        {"file": SimpleUploadedFile(filename, data, content_type="text/plain")},
        format="multipart",
    )


def test_upload_answers_202_with_a_pending_document_and_its_ingest_queued(make_collection, alice_api):
    # Given a collection
    collection = make_collection()

    # When alice uploads a file
    response = _post_upload(alice_api, collection.id, "notes.txt", b"Quotas are per person.")

    # Then the document waits, and one ingest task for it is queued
    assert response.status_code == 202
    document = Document.objects.get()
    assert response.json() == {"id": document.id, "status": "pending"}
    [queued] = _ingest_tasks()
    assert (queued.status, queued.args_kwargs["kwargs"]["document_id"]) == ("READY", document.id)


def test_an_upload_that_rolls_back_leaves_no_ingest_task(make_collection):
    # Given a collection
    collection = make_collection()

    # When the upload's transaction fails after the document was stored
    @transaction.atomic
    def upload_then_die() -> None:
        services.document_upload(
            collection_id=collection.id, user_id="alice", filename="notes.txt", content_type="text/plain", data=b"x"
        )
        raise RuntimeError("the request died")

    with pytest.raises(RuntimeError):
        upload_then_die()

    # Then neither the document nor its task exists
    assert not Document.objects.exists()
    assert _ingest_tasks() == []


def test_ingested_text_document_is_ready_with_chunks(make_collection, upload, alice_api):
    collection = make_collection()

    document_id = upload(collection.id, "long.txt", LONG_TEXT).json()["id"]

    body = alice_api.get(f"/kb/documents/{document_id}").json()
    assert body["status"] == "ready"
    assert body["reason"] == ""
    assert body["chunks"] > 1
    assert body["size"] == len(LONG_TEXT.encode())
    assert body["owner"] == "alice"
    assert body["cited"] == 0
    assert datetime.fromisoformat(body["updated_at"]).tzinfo is not None


def test_ingest_stamps_chunks_with_the_uploader_passed_to_it(make_collection, upload):
    collection = make_collection(writers=["carol"])

    upload(collection.id, "notes.txt", "Sandboxes are closed from my resources.", user_id="carol")

    assert set(Chunk.objects.values_list("created_by", flat=True)) == {"carol"}


def test_markdown_is_ingested_without_its_markup(make_collection, upload, alice_api):
    collection = make_collection()

    document_id = upload(
        collection.id, "guide.md", "# Heading\n\nSee **the [screen](http://x)** now.", content_type="text/markdown"
    ).json()["id"]

    chunks = alice_api.get(f"/kb/documents/{document_id}/chunks").json()
    assert [chunk["text"] for chunk in chunks] == ["Heading\n\nSee the screen now."]


def test_pdf_text_is_extracted_into_chunks(make_collection, upload, alice_api):
    collection = make_collection()
    data = pdf_with_text(["Disk quotas are checked at write time.", "Shrinking is always allowed."])

    document_id = upload(collection.id, "disk.pdf", data, content_type="application/pdf").json()["id"]

    assert alice_api.get(f"/kb/documents/{document_id}").json()["status"] == "ready"
    texts = " ".join(chunk["text"] for chunk in alice_api.get(f"/kb/documents/{document_id}/chunks").json())
    assert "Disk quotas are checked at write time." in texts


def test_unreadable_pdf_fails_ingest_with_a_reason(make_collection, upload, alice_api):
    collection = make_collection()

    document_id = upload(collection.id, "broken.pdf", b"%PDF-1.4 not really", content_type="application/pdf").json()[
        "id"
    ]

    body = alice_api.get(f"/kb/documents/{document_id}").json()
    assert body["status"] == "failed"
    assert "PDF" in body["reason"]
    assert body["chunks"] == 0


def test_text_that_is_not_utf8_fails_ingest_with_a_reason(make_collection, upload, alice_api):
    collection = make_collection()

    document_id = upload(collection.id, "latin.txt", "café".encode("latin-1")).json()["id"]

    body = alice_api.get(f"/kb/documents/{document_id}").json()
    assert body["status"] == "failed"
    assert "UTF-8" in body["reason"]


def test_empty_upload_is_refused_and_stores_nothing(make_collection, upload):
    collection = make_collection()

    response = upload(collection.id, "empty.txt", b"")

    assert response.status_code == 400
    assert response.json()["error"] == "empty_file"
    assert not Document.objects.exists()


def test_unsupported_file_type_is_refused_with_415_naming_the_accepted_types(make_collection, upload):
    collection = make_collection()

    response = upload(collection.id, "slides.pptx", b"PK\x03\x04", content_type="application/vnd.ms-powerpoint")

    assert response.status_code == 415
    body = response.json()
    assert body["error"] == "unsupported_file_type"
    assert "slides.pptx" in body["detail"]
    assert ".md" in body["detail"]
    assert ".pdf" in body["detail"]
    assert not Document.objects.exists()


def test_upload_without_a_file_field_is_refused(make_collection, alice_api):
    collection = make_collection()

    response = alice_api.post(f"/kb/collections/{collection.id}/documents", {"other": "x"}, format="multipart")

    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"


def test_upload_larger_than_the_limit_is_refused_with_413(make_collection, upload, settings):
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 10
    collection = make_collection()

    response = upload(collection.id, "big.txt", "x" * 11)

    assert response.status_code == 413
    assert response.json()["error"] == "file_too_large"
    assert not Document.objects.exists()


def test_upload_into_an_unknown_collection_is_404(upload, db):
    response = upload("col_missing", "notes.txt", "text")

    assert response.status_code == 404
    assert not Document.objects.exists()


def test_unknown_document_is_404(alice_api):
    assert alice_api.get("/kb/documents/doc_missing").status_code == 404


def test_document_list_of_an_unknown_collection_is_404(alice_api):
    assert alice_api.get("/kb/collections/col_missing/documents").status_code == 404


def test_document_list_carries_cited_chunks_owner_size_and_updated_at(make_collection, upload, alice_api):
    collection = make_collection(writers=["bob"])
    upload(collection.id, "a.txt", "Quotas are per person.", user_id="bob")

    rows = alice_api.get(f"/kb/collections/{collection.id}/documents").json()

    assert len(rows) == 1
    row = rows[0]
    assert {key: row[key] for key in ("filename", "owner", "size", "chunks", "cited", "status")} == {
        "filename": "a.txt",
        "owner": "bob",
        "size": 22,
        "chunks": 1,
        "cited": 0,
        "status": "ready",
    }
    assert datetime.fromisoformat(row["updated_at"]).tzinfo is not None


def test_reupload_keeps_the_document_id_and_replaces_its_chunks(make_collection, upload, clock):
    collection = make_collection(writers=["bob"])
    first = upload(collection.id, "notes.txt", "Old text about quotas.").json()["id"]
    old_chunk_ids = set(Chunk.objects.values_list("id", flat=True))
    clock.advance(minutes=5)

    second = upload(collection.id, "notes.txt", "New text about sharing.", user_id="bob").json()["id"]

    assert second == first
    document = Document.objects.get()
    assert document.created_by == "alice"
    assert document.updated_by == "bob"
    assert bytes(document.content) == b"New text about sharing."
    new_chunks = list(Chunk.objects.values_list("id", "text"))
    assert new_chunks
    assert not (old_chunk_ids & {chunk_id for chunk_id, _ in new_chunks})
    assert [text for _, text in new_chunks] == ["New text about sharing."]


def test_reupload_keeps_old_chunk_events_as_history(make_collection, upload, alice_api):
    collection = make_collection()
    document_id = upload(collection.id, "notes.txt", "Old text about quotas.").json()["id"]
    old_chunk = Chunk.objects.get()
    services.record_citations(
        citations=[Citation(1, collection.id, document_id, "notes.txt", (old_chunk.id,))],
        origin_kind="kb_chat",
        origin_id="chat_1",
        cited_by="alice",
        message_id="msg_1",
    )

    upload(collection.id, "notes.txt", "New text about sharing.")

    assert alice_api.get(f"/kb/documents/{document_id}").json()["cited"] == 1
    assert [chunk["cited"] for chunk in alice_api.get(f"/kb/documents/{document_id}/chunks").json()] == [0]
    assert CitationEvent.objects.get().chunk_refs.get().chunk_id == old_chunk.id


def test_same_filename_in_another_collection_is_another_document(make_collection, upload):
    first, second = make_collection("One"), make_collection("Two")

    a = upload(first.id, "notes.txt", "Alpha").json()["id"]
    b = upload(second.id, "notes.txt", "Beta").json()["id"]

    assert a != b


def test_ingest_superseded_by_a_newer_upload_is_discarded(make_collection, alice_api, run_tasks):
    # Given two uploads of one filename, both ingests still queued
    collection = make_collection()
    _post_upload(alice_api, collection.id, "notes.txt", b"First version.")
    _post_upload(alice_api, collection.id, "notes.txt", b"Second version.")

    # When the worker runs them
    run_tasks()

    # Then only the newer bytes are chunked
    assert list(Chunk.objects.values_list("text", flat=True)) == ["Second version."]
    assert Document.objects.get().status == "ready"


def test_ingest_of_a_vanished_document_does_nothing(db):
    # When the ingest of a document deleted meanwhile runs
    ingest_document(document_id="doc_gone", content_version=1, user_id="alice")

    # Then nothing is stored
    assert not Chunk.objects.exists()


def test_the_worker_command_ingests_a_queued_upload(make_collection, alice_api, capsys):
    # Given an upload whose ingest is queued
    collection = make_collection()
    document_id = _post_upload(alice_api, collection.id, "notes.txt", b"Quotas are per person.").json()["id"]

    # When `manage.py worker --once` runs
    call_command("worker", "--once")

    # Then the document is ready and the task is recorded as succeeded
    assert Document.objects.get(pk=document_id).status == "ready"
    assert "ingest_document_task: succeeded" in capsys.readouterr().out
    assert [task.status for task in _ingest_tasks()] == ["SUCCESSFUL"]

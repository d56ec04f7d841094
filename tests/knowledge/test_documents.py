"""Uploads and ingest: formats, bad input, status, re-upload, the ingest task."""

from __future__ import annotations

import io
from datetime import datetime

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import transaction
from django_tasks_db.models import DBTaskResult

from collab.actor import Actor
from collab.errors import DomainError, TooLarge
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
            collection_id=collection.id,
            actor=Actor("alice"),
            filename="notes.txt",
            content_type="text/plain",
            data=b"x",
        )
        raise RuntimeError("the request died")

    with pytest.raises(RuntimeError):
        upload_then_die()

    # Then neither the document nor its task exists
    assert not Document.objects.exists()
    assert _ingest_tasks() == []


def test_ingested_text_document_is_ready_with_chunks(make_collection, upload, alice_api):
    # Given alice's collection
    collection = make_collection()

    # When she uploads a text of several paragraphs and it is ingested
    document_id = upload(collection.id, "long.txt", LONG_TEXT).json()["id"]

    # Then the document is ready with several chunks, its size, her as owner and nothing cited yet
    body = alice_api.get(f"/kb/documents/{document_id}").json()
    assert body["status"] == "ready"
    assert body["reason"] == ""
    assert body["chunks"] > 1
    assert body["size"] == len(LONG_TEXT.encode())
    assert body["owner"] == "alice"
    assert body["cited"] == 0
    assert datetime.fromisoformat(body["updated_at"]).tzinfo is not None


def test_ingest_stamps_chunks_with_the_uploader_passed_to_it(make_collection, upload):
    # Given alice's collection with carol as writer
    collection = make_collection(writers=["carol"])

    # When carol uploads a file and it is ingested
    upload(collection.id, "notes.txt", "Sandboxes are closed from my resources.", user_id="carol")

    # Then every chunk records carol as its creator
    assert set(Chunk.objects.values_list("created_by", flat=True)) == {"carol"}


def test_markdown_is_ingested_without_its_markup(make_collection, upload, alice_api):
    # Given alice's collection
    collection = make_collection()

    # When she uploads markdown with a heading, bold text and a link, and it is ingested
    document_id = upload(
        collection.id, "guide.md", "# Heading\n\nSee **the [screen](http://x)** now.", content_type="text/markdown"
    ).json()["id"]

    # Then the chunk holds the words without the markup, under the heading as its title
    chunks = alice_api.get(f"/kb/documents/{document_id}/chunks").json()
    assert [(chunk["title"], chunk["text"]) for chunk in chunks] == [("Heading", "See the screen now.")]


def test_pdf_text_is_extracted_into_chunks(make_collection, upload, alice_api):
    # Given alice's collection and a PDF of two lines of text
    collection = make_collection()
    data = pdf_with_text(["Disk quotas are checked at write time.", "Shrinking is always allowed."])

    # When she uploads it and it is ingested
    document_id = upload(collection.id, "disk.pdf", data, content_type="application/pdf").json()["id"]

    # Then the document is ready and its chunks hold the PDF's text
    assert alice_api.get(f"/kb/documents/{document_id}").json()["status"] == "ready"
    texts = " ".join(chunk["text"] for chunk in alice_api.get(f"/kb/documents/{document_id}/chunks").json())
    assert "Disk quotas are checked at write time." in texts


def test_unreadable_pdf_fails_ingest_with_a_reason(make_collection, upload, alice_api):
    # Given alice's collection
    collection = make_collection()

    # When she uploads a PDF that is not one, and its ingest runs
    document_id = upload(collection.id, "broken.pdf", b"%PDF-1.4 not really", content_type="application/pdf").json()[
        "id"
    ]

    # Then the document failed with a reason naming PDF, and has no chunks
    body = alice_api.get(f"/kb/documents/{document_id}").json()
    assert body["status"] == "failed"
    assert "PDF" in body["reason"]
    assert body["chunks"] == 0


def test_text_that_is_not_utf8_fails_ingest_with_a_reason(make_collection, upload, alice_api):
    # Given alice's collection
    collection = make_collection()

    # When she uploads a text file in Latin-1, and its ingest runs
    document_id = upload(collection.id, "latin.txt", "café".encode("latin-1")).json()["id"]

    # Then the document failed with a reason naming UTF-8
    body = alice_api.get(f"/kb/documents/{document_id}").json()
    assert body["status"] == "failed"
    assert "UTF-8" in body["reason"]


def test_empty_upload_is_refused_and_stores_nothing(make_collection, upload):
    # Given alice's collection
    collection = make_collection()

    # When she uploads an empty file
    response = upload(collection.id, "empty.txt", b"")

    # Then it is 400 empty_file and nothing is stored
    assert response.status_code == 400
    assert response.json()["error"] == "empty_file"
    assert not Document.objects.exists()


def test_unsupported_file_type_is_refused_with_415_naming_the_accepted_types(make_collection, upload):
    # Given alice's collection
    collection = make_collection()

    # When she uploads a PowerPoint file
    response = upload(collection.id, "slides.pptx", b"PK\x03\x04", content_type="application/vnd.ms-powerpoint")

    # Then it is 415 naming the file and the accepted types, and nothing is stored
    assert response.status_code == 415
    body = response.json()
    assert body["error"] == "unsupported_file_type"
    assert "slides.pptx" in body["detail"]
    assert ".md" in body["detail"]
    assert ".pdf" in body["detail"]
    assert not Document.objects.exists()


def test_upload_without_a_file_field_is_refused(make_collection, alice_api):
    # Given alice's collection
    collection = make_collection()

    # When she posts a form without a file field
    response = alice_api.post(f"/kb/collections/{collection.id}/documents", {"other": "x"}, format="multipart")

    # Then it is 400 validation_error
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"


def test_upload_larger_than_the_limit_is_refused_with_413(make_collection, upload, settings):
    # Given an upload limit of 10 bytes, and alice's collection
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 10
    collection = make_collection()

    # When she uploads 11 bytes
    response = upload(collection.id, "big.txt", "x" * 11)

    # Then it is 413 file_too_large and nothing is stored
    assert response.status_code == 413
    assert response.json()["error"] == "file_too_large"
    assert not Document.objects.exists()


def test_an_upload_past_the_limit_is_refused_having_read_one_byte_past_it(make_collection, settings):
    # Found attacking the upload: the whole file was read into memory before any check, so a file
    # of gigabytes could take the server's memory whoever sent it.
    # Given an upload limit of 10 bytes, alice's collection, and a file of a thousand
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 10
    collection = make_collection()
    file = io.BytesIO(b"x" * 1000)

    # When she uploads it
    with pytest.raises(DomainError) as refused:
        services.document_upload(
            collection_id=collection.id, actor=Actor("alice"), filename="big.txt", content_type="text/plain", data=file
        )

    # Then it is 413, at most 11 bytes were read, and nothing is stored
    assert (type(refused.value), refused.value.error) == (TooLarge, "file_too_large")
    assert file.tell() <= 11
    assert not Document.objects.exists()


def test_an_upload_by_someone_who_may_not_write_is_refused_before_a_byte_is_read(make_collection):
    # Given alice's collection, of which bob is no writer, and bob's file
    collection = make_collection()
    file = io.BytesIO(b"x" * 1000)

    # When bob uploads it
    with pytest.raises(DomainError) as refused:
        services.document_upload(
            collection_id=collection.id, actor=Actor("bob"), filename="notes.txt", content_type="text/plain", data=file
        )

    # Then he is refused and the file was not read at all
    assert refused.value.error == "not_a_writer"
    assert file.tell() == 0


def test_upload_into_an_unknown_collection_is_404(upload, db):
    # Given no such collection
    # When alice uploads into it
    response = upload("col_missing", "notes.txt", "text")

    # Then it is 404 and nothing is stored
    assert response.status_code == 404
    assert not Document.objects.exists()


def test_unknown_document_is_404(alice_api):
    # Given no such document
    # When alice opens it / Then it is 404
    assert alice_api.get("/kb/documents/doc_missing").status_code == 404


def test_document_list_of_an_unknown_collection_is_404(alice_api):
    # Given no such collection
    # When alice lists its documents / Then it is 404
    assert alice_api.get("/kb/collections/col_missing/documents").status_code == 404


def test_document_list_carries_cited_chunks_owner_size_and_updated_at(make_collection, upload, alice_api):
    # Given alice's collection with a document bob uploaded as writer
    collection = make_collection(writers=["bob"])
    upload(collection.id, "a.txt", "Quotas are per person.", user_id="bob")

    # When alice lists its documents
    rows = alice_api.get(f"/kb/collections/{collection.id}/documents").json()

    # Then its row shows its name, bob as owner, its size, chunks, citations, status and update time
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
    # Given alice's notes.txt in a collection where bob writes, and five minutes later
    collection = make_collection(writers=["bob"])
    first = upload(collection.id, "notes.txt", "Old text about quotas.").json()["id"]
    old_chunk_ids = set(Chunk.objects.values_list("id", flat=True))
    clock.advance(minutes=5)

    # When bob uploads notes.txt again with new text
    second = upload(collection.id, "notes.txt", "New text about sharing.", user_id="bob").json()["id"]

    # Then it is the same document, alice's still, last edited by bob, with new content and only new chunks
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
    # Given alice's notes.txt whose one chunk was cited once
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

    # When she uploads notes.txt again with new text
    upload(collection.id, "notes.txt", "New text about sharing.")

    # Then the document still counts its citation, the new chunk counts none, and the event keeps the old chunk
    assert alice_api.get(f"/kb/documents/{document_id}").json()["cited"] == 1
    assert [chunk["cited"] for chunk in alice_api.get(f"/kb/documents/{document_id}/chunks").json()] == [0]
    assert CitationEvent.objects.get().chunk_refs.get().chunk_id == old_chunk.id


def test_same_filename_in_another_collection_is_another_document(make_collection, upload):
    # Given two collections
    first, second = make_collection("One"), make_collection("Two")

    # When notes.txt is uploaded into each
    a = upload(first.id, "notes.txt", "Alpha").json()["id"]
    b = upload(second.id, "notes.txt", "Beta").json()["id"]

    # Then they are two documents
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
    # Given a document deleted while its ingest waited
    # When the ingest runs
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

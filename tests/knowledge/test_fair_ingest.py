"""Background work that takes turns (issue 44): one person's large upload does not hold another's
small one. A document is ready (searchable by words) once its own ingest ran, and its embeddings are
computed in short turns that go to the back of the queue, so a small upload behind a large one
waits for a turn of it, not for all of it. An upload that unpacks to far more text than its size
allows fails with a reason that says so."""

from __future__ import annotations

import pytest

from collab.actor import Actor
from knowledge import services
from knowledge.embeddings import get_embedder
from knowledge.ingest import unembedded_chunks
from knowledge.models import Document
from knowledge.tasks import KNOWLEDGE_QUEUE
from tests.knowledge.pdf import pdf_bomb
from workspace.worker import DEFAULT_QUEUE, WorkerIdentity, run_next

pytestmark = pytest.mark.django_db

LARGE_SECTIONS = 120


def _large_markdown() -> str:
    return "\n\n".join(
        f"# Section {number}\n\nRunbook step {number}: check replica {number} and restart its pool."
        for number in range(LARGE_SECTIONS)
    )


def _upload(user_id: str, filename: str, text: str) -> Document:
    collection = services.collection_create(actor=Actor(user_id), name=f"{user_id}'s notes")
    return services.document_upload(
        collection_id=collection.id,
        actor=Actor(user_id),
        filename=filename,
        content_type="text/markdown",
        data=text.encode(),
    )


def _pending(document: Document) -> int:
    return unembedded_chunks(get_embedder().model).filter(document_id=document.id).count()


def _status(document: Document) -> str:
    return Document.objects.values_list("status", flat=True).get(pk=document.id)


def test_a_small_upload_behind_a_large_one_is_ready_and_embedded_after_one_turn_of_it(local_embeddings, settings):
    # Given bob's upload of many passages, then carol's of one, queued behind it, with turns of 8 passages
    settings.KNOWLEDGE_EMBED_TURN_CHUNKS = 8
    large = _upload("bob", "runbook.md", _large_markdown())
    small = _upload("carol", "note.md", "# Note\n\nThe office closes at six.")
    worker = WorkerIdentity(worker_id="fair-test")
    # When the worker runs its tasks one at a time until carol's document is embedded
    ran: list[str] = []
    while _status(small) != Document.Status.READY or _pending(small):
        done = run_next(worker)
        assert done is not None, f"the queue ran dry first: {ran}"
        ran.append(done.task_name)
    # Then hers was ready after bob's ingest alone, and embedded after one turn of his, while most
    # of his passages still wait for theirs
    assert ran[:2] == ["ingest_document_task", "ingest_document_task"]
    assert ran[2:].count("embed_document_task") <= 2
    assert _pending(large) > LARGE_SECTIONS // 2


def test_every_passage_of_a_large_upload_is_embedded_in_the_end(local_embeddings, settings, run_tasks):
    # Given bob's upload of many passages, with turns of 8 passages
    settings.KNOWLEDGE_EMBED_TURN_CHUNKS = 8
    large = _upload("bob", "runbook.md", _large_markdown())
    # When the worker runs until its queue is empty
    run_tasks()
    # Then every passage has its vector
    assert _status(large) == Document.Status.READY
    assert _pending(large) == 0


def test_an_upload_that_unpacks_to_far_more_text_than_its_size_fails_saying_so(make_collection, upload, alice_api):
    # Given a 32 KB PDF whose 200 pages show one compressed stream of 250 KB of text, with the
    # default limits (the most text a document may hold is far more than it unpacks to)
    bomb = pdf_bomb(stream_bytes=250_000, pages=200)
    # When alice uploads it and it is ingested
    document_id = upload(make_collection().id, "bomb.pdf", bomb, content_type="application/pdf").json()["id"]
    # Then it failed, saying how far past its size it expands, and nothing of it was stored
    body = alice_api.get(f"/kb/documents/{document_id}").json()
    assert body["status"] == "failed"
    assert f"{len(bomb):,}-byte upload expands to more than {20 * len(bomb):,} characters" in body["reason"]
    assert body["chunks"] == 0


def test_a_small_file_may_expand_up_to_the_floor(make_collection, upload, alice_api, settings):
    # Given a floor of 100,000 characters for any upload, and a PDF of under 1 KB that holds about
    # 31,000 characters (some 40 per byte, past the ratio of 20)
    bomb = pdf_bomb(stream_bytes=60_000, pages=1)
    assert len(bomb) < 1024
    # When alice uploads it and it is ingested
    document_id = upload(make_collection().id, "dense.pdf", bomb, content_type="application/pdf").json()["id"]
    # Then it is ready: a small file is never held to less than the floor
    assert alice_api.get(f"/kb/documents/{document_id}").json()["status"] == "ready"


def test_people_take_turns_on_the_upload_queue(settings):
    # Given dave's three uploads, then carol's one, waiting (no embeddings)
    settings.WORKSPACE_EMBEDDINGS_PATH = ""
    daves = [_upload("dave", f"notes{number}.md", f"# Notes {number}\n\nText {number}.") for number in range(3)]
    carols = _upload("carol", "note.md", "# Note\n\nThe office closes at six.")
    worker = WorkerIdentity(worker_id="turns-test")
    # When the worker's upload thread runs them one at a time
    ready_order = []
    while (done := run_next(worker, queue=KNOWLEDGE_QUEUE)) is not None:
        assert done.task_name == "ingest_document_task"
        ready_order += [
            document.filename
            for document in [*daves, carols]
            if _status(document) == Document.Status.READY and document.filename not in ready_order
        ]
    # Then carol's came second, after dave's first, not after all three
    assert ready_order == ["notes0.md", "note.md", "notes1.md", "notes2.md"]


def test_the_default_queue_never_waits_behind_uploads(settings):
    # Given an upload waiting
    settings.WORKSPACE_EMBEDDINGS_PATH = ""
    _upload("dave", "notes.md", "# Notes\n\nText.")
    # When the thread of the default queue (liveness probes, reclaim, the scheduler) looks for work
    # Then there is none for it: uploads are the knowledge queue's
    assert run_next(WorkerIdentity(worker_id="default-test"), queue=DEFAULT_QUEUE) is None

"""Ingest under limits: a small upload that expands (a PDF decompression bomb, a flood of headings)
fails with a reason naming the limit, stores nothing, and never takes the worker's memory or time.

The attack: a 62.6 KB PDF became 40 MB of text and 60,264 chunks (database 11 → 90 MB, worker at
470 MB). Extraction now runs in a child process with its own memory and CPU limits
(knowledge/extraction.py); the limits are lowered here so each attack ends in well under a minute.
"""

from __future__ import annotations

import resource
import subprocess

import pytest

from collab.actor import Actor
from knowledge import services
from knowledge.ingest import ingest_document
from knowledge.models import Chunk, Document
from tests.knowledge.pdf import BOMB_LINE, pdf_bomb

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def test_a_pdf_bomb_fails_at_the_text_limit_and_stores_nothing(make_collection, upload, alice_api, settings):
    # Given a 32 KB PDF whose 200 pages all show one compressed stream of 250 KB of text operators
    # (50 MB in all), and a limit of 300,000 characters of text per document
    settings.KNOWLEDGE_MAX_DOCUMENT_CHARS = 300_000
    bomb = pdf_bomb(stream_bytes=250_000, pages=200)
    assert len(bomb) < 64 * 1024

    # When alice uploads it and it is ingested
    document_id = upload(make_collection().id, "bomb.pdf", bomb, content_type="application/pdf").json()["id"]

    # Then it failed, saying how much text one document may hold, and no chunk was stored
    body = alice_api.get(f"/kb/documents/{document_id}").json()
    assert body["status"] == "failed"
    assert "more than 300,000 characters of text" in body["reason"]
    assert body["chunks"] == 0
    assert not Chunk.objects.exists()


def test_a_pdf_stream_that_needs_more_memory_than_allowed_fails_in_its_child_not_the_worker(
    make_collection, upload, alice_api, settings
):
    # Given a one-page PDF of 200 KB whose content stream expands to 70 MB, and 128 MiB for reading a document
    settings.KNOWLEDGE_EXTRACT_MEMORY_BYTES = 128 * MIB
    bomb = pdf_bomb(stream_bytes=70_000_000, pages=1)
    peak_before = _peak_rss_bytes()

    # When alice uploads it and it is ingested
    document_id = upload(make_collection().id, "bomb.pdf", bomb, content_type="application/pdf").json()["id"]

    # Then it failed on the memory limit, and the worker's own peak memory did not take the 70 MB
    body = alice_api.get(f"/kb/documents/{document_id}").json()
    assert body["status"] == "failed"
    assert "more than 128 MiB of memory" in body["reason"]
    assert body["chunks"] == 0
    assert _peak_rss_bytes() - peak_before < 32 * MIB


@pytest.mark.parametrize(
    ("setting", "value", "reason"),
    [
        ("KNOWLEDGE_EXTRACT_CPU_SECONDS", 1, "more than 1 seconds of processor time"),
        ("KNOWLEDGE_EXTRACT_TIMEOUT_SECONDS", 0.5, "took longer than 0.5 seconds"),
    ],
    ids=["cpu time", "timeout"],
)
def test_reading_past_a_time_limit_fails_naming_it(
    make_collection, upload, alice_api, settings, setting, value, reason
):
    # Given a PDF of 9 KB whose page takes seconds of processor time to read, and 1 second of CPU
    # for reading a document (or half a second for the worker to wait)
    setattr(settings, setting, value)
    bomb = pdf_bomb(stream_bytes=3_000_000, pages=1)

    # When alice uploads it and it is ingested
    document_id = upload(make_collection().id, "slow.pdf", bomb, content_type="application/pdf").json()["id"]

    # Then it failed, naming the limit
    body = alice_api.get(f"/kb/documents/{document_id}").json()
    assert body["status"] == "failed"
    assert reason in body["reason"]


def test_a_flood_of_headings_fails_at_the_chunk_limit(make_collection, upload, alice_api, settings):
    # Given at most 5 chunks per document, and Markdown of 6 sections (each heading starts a chunk)
    settings.KNOWLEDGE_MAX_DOCUMENT_CHUNKS = 5
    markdown = "".join(f"# Part {n}\n\nText of part {n}.\n\n" for n in range(6))

    # When alice uploads it and it is ingested
    document_id = upload(make_collection().id, "parts.md", markdown, content_type="text/markdown").json()["id"]

    # Then it failed, saying how many passages one document may have, with no chunk stored
    body = alice_api.get(f"/kb/documents/{document_id}").json()
    assert body["status"] == "failed"
    assert "more than 5 passages" in body["reason"]
    assert body["chunks"] == 0


def test_a_document_at_the_chunk_limit_is_ingested(make_collection, upload, alice_api, settings):
    # Given at most 5 chunks per document, and Markdown of exactly 5 sections
    settings.KNOWLEDGE_MAX_DOCUMENT_CHUNKS = 5
    markdown = "".join(f"# Part {n}\n\nText of part {n}.\n\n" for n in range(5))

    # When alice uploads it and it is ingested
    document_id = upload(make_collection().id, "parts.md", markdown, content_type="text/markdown").json()["id"]

    # Then it is ready with its 5 chunks
    body = alice_api.get(f"/kb/documents/{document_id}").json()
    assert (body["status"], body["chunks"]) == ("ready", 5)


def test_a_text_file_longer_than_the_text_limit_fails_before_it_is_parsed(make_collection, upload, alice_api, settings):
    # Given at most 1,000 characters of text per document
    settings.KNOWLEDGE_MAX_DOCUMENT_CHARS = 1_000

    # When alice uploads 1,001 characters of Markdown and it is ingested
    document_id = upload(make_collection().id, "long.md", "[" * 1_001, content_type="text/markdown").json()["id"]

    # Then it failed, naming the limit
    body = alice_api.get(f"/kb/documents/{document_id}").json()
    assert body["status"] == "failed"
    assert "more than 1,000 characters of text" in body["reason"]


def test_a_reader_that_cannot_start_leaves_the_document_pending_for_the_next_attempt(make_collection, monkeypatch):
    # Given a pending upload, and a machine that cannot start a process right now
    document = services.document_upload(
        collection_id=make_collection().id,
        actor=Actor("alice"),
        filename="notes.txt",
        content_type="text/plain",
        data=b"Backups are kept.",
    )

    def no_process(*args: object, **kwargs: object) -> None:
        raise OSError("Resource temporarily unavailable")

    monkeypatch.setattr(subprocess, "Popen", no_process)

    # When its ingest runs
    with pytest.raises(OSError, match="temporarily unavailable"):
        ingest_document(document_id=document.id, content_version=document.content_version, user_id="alice")

    # Then the error reaches the task (which tries again), and the document is still pending without chunks
    assert Document.objects.get(pk=document.id).status == Document.Status.PENDING
    assert not Chunk.objects.filter(document_id=document.id).exists()


def test_the_bomb_line_is_text_a_reader_extracts(make_collection, upload, alice_api):
    # Given a small bomb well under every limit: one page showing its line a thousand times
    bomb = pdf_bomb(stream_bytes=len(BOMB_LINE) * 1000, pages=1)

    # When alice uploads it and it is ingested
    document_id = upload(make_collection().id, "small.pdf", bomb, content_type="application/pdf").json()["id"]

    # Then its text is extracted, so the attacks above fail on their limits and not on a broken file
    chunks = alice_api.get(f"/kb/documents/{document_id}/chunks").json()
    assert "Backups are kept for one year." in chunks[0]["text"]
    assert {chunk["page"] for chunk in chunks} == {1}

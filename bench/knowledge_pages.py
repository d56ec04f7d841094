"""The knowledge base's chat page and deletes as the library grows: the page renders a chat of 10
answers as Markdown with citation previews; a delete takes one 20-chunk document (or a collection
of five) out of a library of `size` chunks, search-index rows included; a copy takes a 20-message chat.

.venv/bin/python bench/knowledge_pages.py [--sizes 1000,10000,100000] [--database-url postgres://...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Figure, measure, parse_args, print_table, setup_django, timed_queries
from collab.actor import Actor

CHUNKS_PER_DOCUMENT = 20
DOCUMENTS_PER_COLLECTION = 50
WORDS = [
    "quota",
    "sandbox",
    "memory",
    "disk",
    "share",
    "reader",
    "citation",
    "chunk",
    "marker",
    "answer",
    "collection",
    "document",
]
USER = "alice"


def _chunk_text(number: int) -> str:
    words = [WORDS[(number + offset) % len(WORDS)] for offset in range(40)]
    return f"Passage {number}: " + " ".join(words) + "."


def add_document(collection_id: str, filename: str, first: int) -> str:
    """A ready document of CHUNKS_PER_DOCUMENT chunks, indexed as ingest indexes them."""
    from knowledge.models import Chunk, Document
    from knowledge.search import get_chunk_index

    document = Document(collection_id=collection_id, filename=filename, status=Document.Status.READY, size=1)
    document.stamp_created(USER)
    document.save()
    chunks = [
        Chunk(document=document, collection_id=collection_id, ordinal=ordinal, text=_chunk_text(first + ordinal))
        for ordinal in range(CHUNKS_PER_DOCUMENT)
    ]
    Chunk.objects.bulk_create(chunks)
    get_chunk_index().index_chunks(rows=[(c.id, document.id, collection_id, c.text) for c in chunks])
    return document.id


def grow_library(total_chunks: int, already: int) -> None:
    from knowledge import services

    chunk = already
    while chunk < total_chunks:
        collection = services.collection_create(actor=Actor(USER), name=f"Library {chunk}")
        for number in range(DOCUMENTS_PER_COLLECTION):
            if chunk >= total_chunks:
                break
            add_document(collection.id, f"doc-{number}.md", chunk)
            chunk += CHUNKS_PER_DOCUMENT


def timed(label: str, size: int, repeat: int, prepare, action) -> Figure:
    """Mean of `action` over `repeat` runs, each on what `prepare` made just before (not timed)."""
    total_seconds, db_seconds, queries = 0.0, 0.0, 0
    for _ in range(repeat):
        made = prepare()
        with timed_queries() as timer:
            began = time.perf_counter()
            action(made)
            total_seconds += time.perf_counter() - began
        db_seconds += timer.seconds
        queries += timer.count
    return Figure(label, size, total_seconds / repeat * 1000, db_seconds / repeat * 1000, queries / repeat)


def main() -> None:
    args = parse_args(__doc__ or "", "1000,10000,100000")
    args.repeat = min(args.repeat, 30)
    vendor = setup_django(args.database_url, "knowledge_pages")
    from django.db import connection
    from django.test import Client

    from knowledge import services

    handbook = services.collection_create(actor=Actor(USER), name="Handbook")
    for number in range(3):
        add_document(handbook.id, f"handbook-{number}.md", number * CHUNKS_PER_DOCUMENT)
    chat = services.chat_create(actor=Actor(USER), title="Questions", collection_ids=[handbook.id])
    for number in range(10):
        services.chat_message_send(chat_id=chat.id, actor=Actor(USER), content=f"quota sandbox question {number}?")
    services.chat_share(chat_id=chat.id, actor=Actor(USER), user_ids=["bob"])
    page = Client(HTTP_ACCEPT="text/html", HTTP_X_USER_ID=USER)
    reader = Client(HTTP_X_USER_ID="bob")
    counter = iter(range(10**9))

    figures = []
    filled = 0
    for size in sorted(args.sizes):
        grow_library(size, filled)
        filled = size
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        figures.append(measure("chat page, 10 answers", size, args.repeat, lambda: page.get(f"/kb/chats/{chat.id}")))
        figures.append(
            timed(
                "delete a 20-chunk document",
                size,
                args.repeat,
                lambda: add_document(handbook.id, f"gone-{next(counter)}.md", 0),
                lambda document_id: services.document_delete(document_id=document_id, actor=Actor(USER)),
            )
        )

        def five_documents() -> str:
            collection = services.collection_create(actor=Actor(USER), name="Short-lived")
            for number in range(5):
                add_document(collection.id, f"short-{number}.md", 0)
            return collection.id

        figures.append(
            timed(
                "delete a collection of 5 documents",
                size,
                args.repeat,
                five_documents,
                lambda collection_id: services.collection_delete(collection_id=collection_id, actor=Actor(USER)),
            )
        )
        figures.append(
            measure(
                "copy a 20-message chat (reader)",
                size,
                args.repeat,
                lambda: reader.post(f"/kb/chats/{chat.id}/copy", {}, content_type="application/json"),
            )
        )
    print_table(vendor, figures)


if __name__ == "__main__":
    main()

"""Benchmark: collection, document-list and chunk-list reads with `cited` counts at growing event-log sizes.

Usage: .venv/bin/python bench/citations.py [--sizes 10000 100000 1000000] [--database-url postgres://...]

Builds a throwaway database (a temporary SQLite file, or a fresh `ws_bench_citations_<pid>` database on
the PostgreSQL server named by --database-url, dropped afterwards), loads 20 collections x 50 documents
x 20 chunks, then appends citation events in bulk up to each size (collections and documents chosen with
a Zipf-like skew, 1-3 adjacent chunks per event) and times the three reads through the same selectors
the API uses. Prints the time of each read (median of the runs, database work and fetch) and query counts;
asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS, DOCUMENTS, CHUNKS = 20, 50, 20
RUNS = 7
BATCH = 20_000


def _throwaway_url(database_url: str | None) -> tuple[str, Callable[[], None]]:
    if not database_url or database_url.startswith("sqlite"):
        folder = tempfile.mkdtemp(prefix="bench-citations-")
        path = Path(folder) / "bench.sqlite3"

        def remove() -> None:
            for leftover in Path(folder).glob("bench.sqlite3*"):
                leftover.unlink()
            Path(folder).rmdir()

        return f"sqlite:///{path}", remove
    import psycopg

    parts = urlsplit(database_url)
    name = f"ws_bench_citations_{os.getpid()}"
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return urlunsplit(parts._replace(path=f"/{name}")), drop


def _setup_django(url: str) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workspace.settings")
    os.environ.setdefault("WORKSPACE_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _zipf_weights(count: int) -> list[float]:
    return [1 / (rank + 1) for rank in range(count)]


def _load_library() -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
    """Collections, documents per collection and chunks per document, inserted in bulk."""
    from knowledge.models import Chunk, Collection, Document

    collections = [Collection(id=f"col_{c:03}", name=f"Collection {c}") for c in range(COLLECTIONS)]
    Collection.objects.bulk_create(collections)
    documents, chunks = [], []
    docs_of: dict[str, list[str]] = {}
    chunks_of: dict[str, list[str]] = {}
    for collection in collections:
        for d in range(DOCUMENTS):
            doc_id = f"doc_{collection.id[4:]}_{d:03}"
            docs_of.setdefault(collection.id, []).append(doc_id)
            documents.append(Document(id=doc_id, collection=collection, filename=f"{d}.txt", size=1000, status="ready"))
            for k in range(CHUNKS):
                chunk_id = f"chk_{doc_id[4:]}_{k:02}"
                chunks_of.setdefault(doc_id, []).append(chunk_id)
                chunks.append(
                    Chunk(id=chunk_id, document_id=doc_id, collection=collection, ordinal=k, text=f"chunk {k}")
                )
    Document.objects.bulk_create(documents, batch_size=2000)
    Chunk.objects.bulk_create(chunks, batch_size=2000)
    return [c.id for c in collections], docs_of, chunks_of


def _event_rows(start: int, stop: int, library: tuple, rng: random.Random) -> tuple[list[tuple], list[tuple]]:
    collection_ids, docs_of, chunks_of = library
    collection_weights, document_weights = _zipf_weights(COLLECTIONS), _zipf_weights(DOCUMENTS)
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    events, refs = [], []
    for event_id in range(start + 1, stop + 1):
        collection_id = rng.choices(collection_ids, collection_weights)[0]
        document_id = rng.choices(docs_of[collection_id], document_weights)[0]
        first = rng.randrange(CHUNKS - 2)
        cited = chunks_of[document_id][first : first + rng.randint(1, 3)]
        events.append(
            (event_id, collection_id, document_id, "kb_chat", "chat_bench", "alice", 1, f"msg_{event_id}", moment)
        )
        refs.extend((event_id, chunk_id) for chunk_id in cited)
    return events, refs


def _append_events(start: int, stop: int, library: tuple, rng: random.Random) -> None:
    from django.db import connection, transaction

    event_sql = (
        "INSERT INTO knowledge_citationevent (id, collection_id, document_id, origin_kind, origin_id, cited_by, "
        "marker, message_id, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
    )
    ref_sql = "INSERT INTO knowledge_citationeventchunk (event_id, chunk_id) VALUES (%s, %s)"
    for low in range(start, stop, BATCH):
        events, refs = _event_rows(low, min(low + BATCH, stop), library, rng)
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                _copy(cursor, "knowledge_citationevent", EVENT_COLUMNS, events)
                _copy(cursor, "knowledge_citationeventchunk", ("event_id", "chunk_id"), refs)
            else:
                cursor.executemany(event_sql, events)
                cursor.executemany(ref_sql, refs)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Index-only scans need a current visibility map, as autovacuum would give a live table.
            cursor.execute("VACUUM ANALYZE knowledge_citationevent")
            cursor.execute("VACUUM ANALYZE knowledge_citationeventchunk")
        else:
            cursor.execute("ANALYZE")


EVENT_COLUMNS = (
    "id",
    "collection_id",
    "document_id",
    "origin_kind",
    "origin_id",
    "cited_by",
    "marker",
    "message_id",
    "created_at",
)


def _copy(cursor, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    with cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _measure(read: Callable[[], list]) -> tuple[float, int, int]:
    """Median milliseconds of the whole read over RUNS, statements per read, rows returned.

    The read is timed from outside: SQLite evaluates the correlated counts while rows are
    fetched, after `execute` returns, so timing statements alone would miss the work. Building
    at most 50 small Python rows adds well under 0.1 ms.
    """
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        rows = len(read())
    timings = []
    for _ in range(RUNS):
        started = time.perf_counter()
        read()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings), len(captured.captured_queries), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--database-url", default=None, help="postgres://... to bench PostgreSQL (default SQLite)")
    args = parser.parse_args()
    url, cleanup = _throwaway_url(args.database_url)
    try:
        _setup_django(url)
        _run(sorted(args.sizes))
    finally:
        cleanup()


def _run(sizes: list[int]) -> None:
    from django.db import connection

    from knowledge import selectors

    rng = random.Random(7)
    library = _load_library()
    busiest_collection = library[0][0]
    busiest_document = library[1][busiest_collection][0]
    reads = {
        "collections": selectors.collections_with_counts,
        "documents (busiest coll.)": lambda: selectors.documents_with_counts(collection_id=busiest_collection),
        "chunks (busiest doc.)": lambda: selectors.chunks_with_counts(document_id=busiest_document),
    }
    print(f"backend: {connection.vendor}; {COLLECTIONS} collections x {DOCUMENTS} documents x {CHUNKS} chunks")
    print(f"{'events':>9}  {'read':<26} {'queries':>7} {'rows':>5} {'ms (median)':>12}  {'events counted':>14}")
    loaded = 0
    for size in sizes:
        started = time.perf_counter()
        _append_events(loaded, size, library, rng)
        loaded = size
        load_seconds = time.perf_counter() - started
        counted = {
            "collections": size,
            "documents (busiest coll.)": _events_in(busiest_collection),
            "chunks (busiest doc.)": _events_of(busiest_document),
        }
        for name, read in reads.items():
            db_ms, statements, rows = _measure(read)
            print(f"{size:>9}  {name:<26} {statements:>7} {rows:>5} {db_ms:>12.2f}  {counted[name]:>14}")
        print(f"{'':>9}  (appended in {load_seconds:.1f} s)")


def _events_in(collection_id: str) -> int:
    from knowledge.models import CitationEvent

    return CitationEvent.objects.filter(collection_id=collection_id).count()


def _events_of(document_id: str) -> int:
    from knowledge.models import CitationEvent

    return CitationEvent.objects.filter(document_id=document_id).count()


if __name__ == "__main__":
    main()

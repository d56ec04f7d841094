"""Benchmark: collection, document-list and chunk-list reads with `cited` counts at growing event-log sizes.

Usage: .venv/bin/python bench/citations.py [--sizes 100000 1000000 10000000] [--database-url postgres://...]

Builds a throwaway database (a temporary SQLite file, or a fresh `ws_bench_citations_<pid>` database on
the PostgreSQL server named by --database-url, dropped afterwards), loads 20 collections x 50 documents
x 20 chunks, then appends citation events with set-based SQL up to each size (generate_series on
PostgreSQL, a recursive CTE on SQLite; collections and documents skewed towards rank 0, 2-4 adjacent
chunks per event). At each size all but the last LIVE events are closed into slices by the same
`citation_slices_close` the worker runs, and the rest stay in the open slice, counted live, as in
the hour after a close. Times the three reads through the selectors the API uses (median of the
runs, database work and fetch), the write path of one answer, and checks totals + live == log at
the end. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS, DOCUMENTS, CHUNKS = 20, 50, 20
RUNS = 7
BATCH = 1_000_000
# Events of the open slice at each size: a busy hour since the last close, counted live.
LIVE = 2_000


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


def _skewed(vendor: str, count: int, draws: int) -> str:
    """The least of `draws` uniform picks in [0, count): rank 0 is the busiest, like a Zipf tail."""
    pick = f"floor(random() * {count})" if vendor == "postgresql" else f"(abs(random()) % {count})"
    return f"{'LEAST' if vendor == 'postgresql' else 'MIN'}({', '.join([pick] * draws)})"


def _padded(vendor: str, expression: str, width: int) -> str:
    if vendor == "postgresql":
        return f"lpad(({expression})::int::text, {width}, '0')"
    return f"substr('{'0' * width}' || ({expression}), -{width})"


def _append_events(start: int, stop: int, moment: datetime) -> None:
    """Events `start < id <= stop` in set-based SQL (generate_series / a recursive CTE), each citing
    2-4 adjacent chunks (about 3 refs per event), collections and documents skewed to rank 0."""
    from django.db import connection, transaction

    vendor = connection.vendor
    series = (
        "SELECT g AS n FROM generate_series(%s, %s) AS g"
        if vendor == "postgresql"
        else "WITH RECURSIVE s(n) AS (SELECT %s UNION ALL SELECT n + 1 FROM s WHERE n < %s) SELECT n FROM s"
    )
    picks = (
        f"SELECT n, {_skewed(vendor, COLLECTIONS, 6)} AS c, {_skewed(vendor, DOCUMENTS, 12)} AS d FROM ({series}) AS g"
    )
    collection, document = _padded(vendor, "c", 3), _padded(vendor, "d", 3)
    events = (
        "INSERT INTO knowledge_citationevent (id, collection_id, document_id, origin_kind, origin_id, cited_by, "
        f"marker, message_id, created_at) SELECT n, 'col_' || {collection}, 'doc_' || {collection} || '_' || "
        f"{document}, 'kb_chat', 'chat_bench', 'alice', 1, 'msg_' || n, %s FROM ({picks}) AS p"
    )
    chunk = _padded(vendor, f"(e.id * 7) % {CHUNKS - 3} + k.n", 2)
    refs = (
        "WITH k(n) AS (VALUES (0), (1), (2), (3)) INSERT INTO knowledge_citationeventchunk (event_id, chunk_id) "
        f"SELECT e.id, 'chk_' || substr(e.document_id, 5) || '_' || {chunk} FROM knowledge_citationevent AS e, k "
        "WHERE e.id > %s AND e.id <= %s AND k.n <= 1 + e.id % 3"
    )
    stamp = connection.ops.adapt_datetimefield_value(moment)
    for low in range(start, stop, BATCH):
        high = min(low + BATCH, stop)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(events, [low + 1, high, stamp])
            cursor.execute(refs, [low, high])
    with connection.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute("SELECT setval(pg_get_serial_sequence('knowledge_citationevent', 'id'), %s)", [stop])
            # Index-only scans need a current visibility map, as autovacuum would give a live table.
            cursor.execute("VACUUM ANALYZE knowledge_citationevent")
            cursor.execute("VACUUM ANALYZE knowledge_citationeventchunk")
        else:
            cursor.execute("ANALYZE")


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
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--database-url", default=None, help="postgres://... to bench PostgreSQL (default SQLite)")
    args = parser.parse_args()
    url, cleanup = _throwaway_url(args.database_url)
    try:
        _setup_django(url)
        _run(sorted(args.sizes))
    finally:
        cleanup()


class _BenchClock:
    """The service clock, moved an hour per size so each size closes one slice."""

    def __init__(self) -> None:
        self.current = datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current


def _run(sizes: list[int]) -> None:
    from django.db import connection

    from collab import clock as clock_module
    from knowledge import selectors
    from knowledge.services import citation_slices_close

    bench_clock = _BenchClock()
    clock_module.set_source(bench_clock.now)
    library = _load_library()
    busiest_collection = library[0][0]
    busiest_document = library[1][busiest_collection][0]
    reads = {
        "collections": selectors.collections_with_counts,
        "documents (busiest coll.)": lambda: selectors.documents_with_counts(collection_id=busiest_collection),
        "chunks (busiest doc.)": lambda: selectors.chunks_with_counts(document_id=busiest_document),
    }
    print(f"backend: {connection.vendor}; {COLLECTIONS} collections x {DOCUMENTS} documents x {CHUNKS} chunks")
    print(f"each size: all but the last {LIVE:,} events in closed slices, those {LIVE:,} in the open slice")
    print(f"{'events':>9}  {'read':<26} {'queries':>7} {'rows':>5} {'ms (median)':>12}  {'events counted':>14}")
    loaded = 0
    for size in sizes:
        started = time.perf_counter()
        closed_part = max(size - LIVE, loaded)
        _append_events(loaded, closed_part, bench_clock.current)
        bench_clock.current += timedelta(hours=1)
        closing = time.perf_counter()
        citation_slices_close()
        close_seconds = time.perf_counter() - closing
        _append_events(closed_part, size, bench_clock.current + timedelta(minutes=30))
        loaded = size
        load_seconds = time.perf_counter() - started
        counted = {
            "collections": _events_total(),
            "documents (busiest coll.)": _events_in(busiest_collection),
            "chunks (busiest doc.)": _events_of(busiest_document),
        }
        for name, read in reads.items():
            db_ms, statements, rows = _measure(read)
            print(f"{size:>9}  {name:<26} {statements:>7} {rows:>5} {db_ms:>12.2f}  {counted[name]:>14}")
        write_ms, write_statements, inserts = _measure_write(library, size)
        loaded = _last_event_id()
        print(
            f"{'':>9}  (write path, one answer of 3 markers: {write_ms:.2f} ms, {write_statements} statements, "
            f"{inserts} inserts)"
        )
        print(f"{'':>9}  (appended in {load_seconds:.1f} s; closing the slice took {close_seconds:.2f} s)")
    problems = selectors.citation_counts_check()
    print(f"check: totals + live == log: {'ok' if problems.ok else problems.mismatches[:5]}")


def _measure_write(library: tuple, size: int) -> tuple[float, int, int]:
    """Median of recording one answer (3 markers, 1-2 chunks each) through the service."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from knowledge.answers import Citation
    from knowledge.services import record_citations

    collection_ids, docs_of, chunks_of = library
    document_id = docs_of[collection_ids[0]][0]
    chunks = chunks_of[document_id]
    citations = [
        Citation(m, collection_ids[0], document_id, "0.txt", tuple(chunks[m : m + 1 + m % 2])) for m in (1, 2, 3)
    ]

    def write(run: int) -> None:
        record_citations(
            citations=citations, origin_kind="kb_chat", origin_id="chat_w", cited_by="bob", message_id=f"w{size}_{run}"
        )

    with CaptureQueriesContext(connection) as captured:
        write(-1)
    inserts = sum(query["sql"].startswith(("INSERT", "WITH")) for query in captured.captured_queries)
    timings = []
    for run in range(RUNS):
        started = time.perf_counter()
        write(run)
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings), len(captured.captured_queries), inserts


def _last_event_id() -> int:
    from django.db.models import Max

    from knowledge.models import CitationEvent

    return CitationEvent.objects.aggregate(last=Max("id"))["last"] or 0


def _events_total() -> int:
    from knowledge.models import CitationEvent

    return CitationEvent.objects.count()


def _events_in(collection_id: str) -> int:
    from knowledge.models import CitationEvent

    return CitationEvent.objects.filter(collection_id=collection_id).count()


def _events_of(document_id: str) -> int:
    from knowledge.models import CitationEvent

    return CitationEvent.objects.filter(document_id=document_id).count()


if __name__ == "__main__":
    main()

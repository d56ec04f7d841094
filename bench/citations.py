"""Benchmark: the collection, document and chunk lists with `cited`, and the citation write path, as the log grows.

Usage: .venv/bin/python bench/citations.py [--sizes 100000,1000000,10000000] [--live 5000] [--database-url postgres://...]

Builds a throwaway database (a temporary SQLite file, or a fresh database on the PostgreSQL server
named by --database-url, dropped afterwards), loads 20 collections x 50 documents x 20 chunks, then
appends citation events with set-based SQL up to each size (generate_series on PostgreSQL, a
recursive CTE on SQLite; collections and documents skewed towards rank 0; 2-4 adjacent chunks per
event, about 3 chunk rows each). At each size every event but the last --live ones sits in closed
slices (closed by the same `citation_slices_close` the worker runs) and those --live ones are the
open slice, counted live, as in a busy hour after a close. Then, at that size (median, fastest and
slowest of RUNS runs, DEBUG off as in production):

- the three lists through the selectors the API uses, on an open connection;
- the same three lists as API requests through Django's test client (middleware, DRF, JSON; on
  SQLite each request opens its connection, as CONN_MAX_AGE=0 makes it do there);
- for reference, the collection list counted over the whole log, as it was before the summaries;
- the write path: recording one answer of 3 markers through `record_citations`;
- the hourly close of the open slice (event writers wait that long);
- the database size.

At the end the full check (summaries + live slice == the whole log) runs once. Asserts nothing
about time. Mind the disk: 10^7 events take about 5 GB on SQLite and 8 GB on PostgreSQL (and some
5 and 8 minutes to load).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

COLLECTIONS, DOCUMENTS, CHUNKS = 20, 50, 20
RUNS = 31
BATCH = 500_000
# SQLite's page cache while loading only: the default 2 MB spills the hot index pages of a large
# insert again and again, and each spill appends the page to the write-ahead log once more.
LOAD_CACHE_KIB = 1_048_576


@dataclass(frozen=True)
class Library:
    collection_ids: list[str]
    documents_of: dict[str, list[str]]
    chunks_of: dict[str, list[str]]

    @property
    def busiest_collection(self) -> str:
        return self.collection_ids[0]

    @property
    def busiest_document(self) -> str:
        return self.documents_of[self.busiest_collection][0]


@contextmanager
def _database(database_url: str) -> Iterator[str]:
    """A throwaway SQLite file, or a throwaway database on the PostgreSQL server of `database_url`."""
    if database_url:
        from bench.live import throwaway_database

        with throwaway_database(database_url, prefix="bench_citations") as url:
            yield url
        return
    folder = Path(tempfile.mkdtemp(prefix="bench-citations-"))
    try:
        yield f"sqlite:///{folder / 'bench.sqlite3'}"
    finally:
        for leftover in folder.glob("bench.sqlite3*"):
            leftover.unlink()
        folder.rmdir()


def _setup_django(url: str) -> None:
    """Production settings but the mock identity, so the test client names its user by header."""
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workspace.settings")
    os.environ.setdefault("WORKSPACE_LOG_LEVEL", "WARNING")
    os.environ.setdefault("WORKSPACE_REQUEST_LOG_LEVEL", "WARNING")  # a line per request on stdout otherwise
    from bench.common import production_mode

    production_mode("citations")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _load_library() -> Library:
    """Collections, documents per collection and chunks per document, inserted in bulk."""
    from knowledge.models import Chunk, Collection, Document

    collections = [Collection(id=f"col_{c:03}", name=f"Collection {c}", created_by="alice") for c in range(COLLECTIONS)]
    Collection.objects.bulk_create(collections)
    documents, chunks = [], []
    documents_of: dict[str, list[str]] = {}
    chunks_of: dict[str, list[str]] = {}
    for collection in collections:
        for d in range(DOCUMENTS):
            doc_id = f"doc_{collection.id[4:]}_{d:03}"
            documents_of.setdefault(collection.id, []).append(doc_id)
            documents.append(Document(id=doc_id, collection=collection, filename=f"{d}.txt", size=1000, status="ready"))
            for k in range(CHUNKS):
                chunk_id = f"chk_{doc_id[4:]}_{k:02}"
                chunks_of.setdefault(doc_id, []).append(chunk_id)
                chunks.append(
                    Chunk(id=chunk_id, document_id=doc_id, collection=collection, ordinal=k, text=f"chunk {k}")
                )
    Document.objects.bulk_create(documents, batch_size=2000)
    Chunk.objects.bulk_create(chunks, batch_size=2000)
    return Library([c.id for c in collections], documents_of, chunks_of)


def _skewed(vendor: str, count: int, draws: int) -> str:
    """The least of `draws` uniform picks in [0, count): rank 0 is the busiest, like a Zipf tail."""
    pick = f"floor(random() * {count})" if vendor == "postgresql" else f"(abs(random()) %% {count})"
    return f"{'LEAST' if vendor == 'postgresql' else 'MIN'}({', '.join([pick] * draws)})"


def _padded(vendor: str, expression: str, width: int) -> str:
    if vendor == "postgresql":
        return f"lpad(({expression})::int::text, {width}, '0')"
    return f"substr('{'0' * width}' || ({expression}), -{width})"


def _append_statements(vendor: str) -> tuple[str, str]:
    """The two INSERT ... SELECT statements that append events `low < id <= high` and their chunk
    rows; parameters in text order, `%%` is a modulo escaped for the driver."""
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
        f"{document}, 'kb_chat', 'chat_' || (n / 20), 'alice', 1 + n %% 3, 'msg_' || n, %s FROM ({picks}) AS p"
    )
    chunk = _padded(vendor, f"(e.id * 7) %% {CHUNKS - 3} + k.n", 2)
    refs = (
        "WITH k(n) AS (VALUES (0), (1), (2), (3)) INSERT INTO knowledge_citationeventchunk (event_id, chunk_id) "
        f"SELECT e.id, 'chk_' || substr(e.document_id, 5) || '_' || {chunk} FROM knowledge_citationevent AS e, k "
        "WHERE e.id > %s AND e.id <= %s AND k.n <= 1 + e.id %% 3"
    )
    return events, refs


# The non-unique (key, id) indexes of the log, built once after a bulk load rather than row by row:
# at 10^7 events that turns most of an hour of PostgreSQL's index maintenance into minutes. The
# open slice of each size is appended with every index in place, as the service writes it.
REBUILT_INDEXES = ("kb_event_collection_live_idx", "kb_event_document_live_idx", "kb_event_chunk_live_idx")


def _index_definitions(cursor: Any, vendor: str) -> list[str]:
    if vendor == "postgresql":
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = ANY(%s)", [list(REBUILT_INDEXES)])
    else:
        marks = ", ".join(["%s"] * len(REBUILT_INDEXES))
        cursor.execute(f"SELECT sql FROM sqlite_master WHERE type = 'index' AND name IN ({marks})", REBUILT_INDEXES)
    return [row[0] for row in cursor.fetchall()]


@contextmanager
def _loading(bulk: bool) -> Iterator[None]:
    """Load settings of this connection only (a big page cache on SQLite, no commit flush and more
    memory for index builds on PostgreSQL); with `bulk`, the (key, id) indexes are rebuilt after."""
    from django.db import connection

    vendor = connection.vendor
    with connection.cursor() as cursor:
        if vendor == "sqlite":
            cursor.execute(f"PRAGMA cache_size = -{LOAD_CACHE_KIB}")
        else:
            cursor.execute("SET synchronous_commit = off")
            cursor.execute("SET maintenance_work_mem = '512MB'")
        definitions = _index_definitions(cursor, vendor) if bulk else []
        for name in REBUILT_INDEXES if bulk else ():
            cursor.execute(f"DROP INDEX {name}")
    yield
    with connection.cursor() as cursor:
        for definition in definitions:
            cursor.execute(definition)
    # The next statement opens a connection with the service's own settings (default page cache).
    connection.close()


def _append_events(start: int, stop: int, moment: datetime) -> None:
    """Events `start < id <= stop`, BATCH to a transaction."""
    from django.db import connection, transaction

    if stop <= start:
        return
    vendor = connection.vendor
    events, refs = _append_statements(vendor)
    stamp = connection.ops.adapt_datetimefield_value(moment)
    with _loading(bulk=stop - start > BATCH):
        for low in range(start, stop, BATCH):
            high = min(low + BATCH, stop)
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(events, [stamp, low + 1, high])
                cursor.execute(refs, [low, high])
            if vendor == "sqlite":
                with connection.cursor() as cursor:
                    cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT setval(pg_get_serial_sequence('knowledge_citationevent', 'id'), %s)", [stop])


def _vacuum() -> None:
    """What autovacuum does to a table that has stopped growing: on PostgreSQL, index-only scans need
    a current visibility map. SQLite gets nothing: the service never runs ANALYZE there either."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE knowledge_citationevent")
            cursor.execute("VACUUM ANALYZE knowledge_citationeventchunk")
            cursor.execute("VACUUM ANALYZE knowledge_citationtotal")


@dataclass(frozen=True)
class Timing:
    median_ms: float
    fastest_ms: float
    slowest_ms: float
    statements: int
    inserts: int
    rows: int


def _timed(action: Callable[[int], object], runs: int = RUNS) -> Timing:
    """Median, fastest and slowest milliseconds of `action(run)` over `runs`, after one run that
    counts the statements (`runs=0`: that one run is the timing). On a shared machine the median
    carries the others' load and the fastest run comes closest to the cost of the work alone. Timed
    from outside: SQLite evaluates the correlated counts while rows are fetched, after `execute`."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        started = time.perf_counter()
        result = action(-1)
        timings = [(time.perf_counter() - started) * 1000]
    sqls = [query["sql"].lstrip().upper() for query in captured.captured_queries]
    if runs:
        timings = []
    for run in range(runs):
        started = time.perf_counter()
        action(run)
        timings.append((time.perf_counter() - started) * 1000)
    rows = len(result) if isinstance(result, list) else 0
    inserts = sum(sql.startswith("INSERT") for sql in sqls)
    return Timing(statistics.median(timings), min(timings), max(timings), len(sqls), inserts, rows)


def _requested(client: Any, path: str) -> Callable[[int], list]:
    def get(_run: int) -> list:
        response = client.get(path)
        if response.status_code != 200:
            raise RuntimeError(f"GET {path} answered {response.status_code}: {response.content[:200]!r}")
        return response.json()

    return get


def _whole_log_collections() -> list:
    """The collection list's counts as they were before the summaries: every event of the log."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.id, (SELECT COUNT(*) FROM knowledge_citationevent AS e WHERE e.collection_id = c.id) "
            "FROM knowledge_collection AS c"
        )
        return cursor.fetchall()


def _record_answer(library: Library, message_id: str) -> int:
    """One answer of 3 markers (1-2 chunks each) recorded through the service, as a chat does."""
    from knowledge.answers import Citation
    from knowledge.services import record_citations

    collection_id, document_id = library.busiest_collection, library.busiest_document
    chunks = library.chunks_of[document_id]
    citations = [Citation(m, collection_id, document_id, "0.txt", tuple(chunks[m : m + 1 + m % 2])) for m in (1, 2, 3)]
    return record_citations(
        citations=citations, origin_kind="kb_chat", origin_id="chat_w", cited_by="bob", message_id=message_id
    )


def _database_megabytes() -> float:
    from django.conf import settings
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            return cursor.fetchone()[0] / 2**20
    name = Path(settings.DATABASES["default"]["NAME"])
    return sum(path.stat().st_size for path in name.parent.glob(name.name + "*")) / 2**20


class BenchClock:
    """The service clock: an hour passes between sizes, so each size closes its own slice."""

    def __init__(self) -> None:
        self.current = datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current


HEADER = f"{'events':>11}  {'figure':<44} {'queries':>7} {'median ms':>10} {'fastest ms':>10} {'slowest ms':>10}  note"


def _line(size: int, figure: str, timing: Timing, note: str) -> None:
    print(
        f"{size:>11,}  {figure:<44} {timing.statements:>7} {timing.median_ms:>10.2f} "
        f"{timing.fastest_ms:>10.2f} {timing.slowest_ms:>10.2f}  {note}",
        flush=True,
    )


def _events_counted(library: Library) -> dict[str, int]:
    from knowledge.models import CitationEvent

    return {
        "collections": CitationEvent.objects.count(),
        "collection": CitationEvent.objects.filter(collection_id=library.busiest_collection).count(),
        "document": CitationEvent.objects.filter(document_id=library.busiest_document).count(),
    }


def _reads(library: Library, client: Any) -> Iterator[tuple[str, Timing, str]]:
    """Each list through its selector and as an API request, then the whole-log reference."""
    from knowledge import selectors

    counted = _events_counted(library)
    collection, document = library.busiest_collection, library.busiest_document
    reads = [
        ("collections", selectors.collections_with_counts, "/kb/collections", f"{counted['collections']:,} events"),
        (
            "documents (busiest coll.)",
            lambda: selectors.documents_with_counts(collection_id=collection),
            f"/kb/collections/{collection}/documents",
            f"{counted['collection']:,} events in the collection",
        ),
        (
            "chunks (busiest doc.)",
            lambda: selectors.chunks_with_counts(document_id=document),
            f"/kb/documents/{document}/chunks",
            f"{counted['document']:,} events of the document",
        ),
    ]
    for name, select, _path, note in reads:
        timing = _timed(lambda _run, select=select: select())
        yield f"{name} with cited", timing, f"{timing.rows} rows; {note}"
    for name, _select, path, _note in reads:
        timing = _timed(_requested(client, path))
        yield f"GET {name}", timing, f"{timing.rows} rows; {path}"
    timing = _timed(lambda _run: _whole_log_collections())
    yield "reference: collections over the whole log", timing, "counted as before the summaries"


def _explain(library: Library) -> None:
    """The plan of each list's statement: EXPLAIN ANALYZE on PostgreSQL, the query plan on SQLite."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from knowledge import selectors

    lists = {
        "collections": selectors.collections_with_counts,
        "documents": lambda: selectors.documents_with_counts(collection_id=library.busiest_collection),
        "chunks": lambda: selectors.chunks_with_counts(document_id=library.busiest_document),
    }
    prefix = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " if connection.vendor == "postgresql" else "EXPLAIN QUERY PLAN "
    for name, read in lists.items():
        with CaptureQueriesContext(connection) as captured:
            read()
        with connection.cursor() as cursor:
            cursor.execute(prefix + captured.captured_queries[0]["sql"].replace("%", "%%"))
            plan = [" | ".join(str(part) for part in row) for row in cursor.fetchall()]
        print(f"{'':>11}  plan of the {name} list:", *(f"{'':>13}{line}" for line in plan), sep="\n", flush=True)


def run(sizes: list[int], live: int, *, explain: bool = False) -> None:
    from django.db import connection
    from django.db.models import Max
    from django.test import Client

    from collab import clock as clock_module
    from knowledge import selectors
    from knowledge.models import CitationEvent
    from knowledge.services import citation_slices_close

    bench_clock = BenchClock()
    clock_module.set_source(bench_clock.now)
    library = _load_library()
    client = Client(HTTP_X_USER_ID="alice")
    print(f"backend: {connection.vendor}; {COLLECTIONS} collections x {DOCUMENTS} documents x {CHUNKS} chunks")
    print(f"at each size the last {live:,} events are the open slice (counted live), the rest in closed slices")
    print(HEADER, flush=True)
    loaded = 0
    for size in sizes:
        began = time.perf_counter()
        closed_part = max(size - live, loaded)
        _append_events(loaded, closed_part, bench_clock.current)
        bench_clock.current += timedelta(hours=1)
        closing = time.perf_counter()
        bulk = citation_slices_close()
        bulk_seconds = time.perf_counter() - closing
        _vacuum()
        _append_events(closed_part, size, bench_clock.current + timedelta(minutes=30))
        print(
            f"{'':>11}  (appended {size - loaded:,} events in {time.perf_counter() - began:.0f} s; "
            f"closing {bulk.events:,} of them as one slice took {bulk_seconds:.1f} s)",
            flush=True,
        )
        for figure, timing, note in _reads(library, client):
            _line(size, figure, timing, note)
        if explain:
            _explain(library)
        write = _timed(lambda run, size=size: _record_answer(library, f"bench_{size}_{run}"))
        _line(size, "write: one answer, 3 markers", write, f"{write.inserts} inserts")
        bench_clock.current += timedelta(hours=1)
        open_events = CitationEvent.objects.filter(id__gt=bulk.closed_through).count()
        hourly = _timed(lambda _run: citation_slices_close(), runs=0)
        _line(size, "hourly close of the open slice", hourly, f"{open_events:,} events; writers wait this long")
        loaded = CitationEvent.objects.aggregate(last=Max("id"))["last"] or 0
        print(f"{'':>11}  (database: {_database_megabytes():,.0f} MB)", flush=True)
    checking = time.perf_counter()
    check = selectors.citation_counts_check()
    verdict = "ok" if check.ok else f"{len(check.mismatches)} mismatches: {check.mismatches[:3]}"
    print(f"check: summaries + live slice == whole log: {verdict} ({time.perf_counter() - checking:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000,10000000", help="comma-separated event counts")
    parser.add_argument("--live", type=int, default=5_000, help="events in the open slice at each size")
    parser.add_argument("--database-url", default="", help="postgres://... to bench PostgreSQL (default SQLite)")
    parser.add_argument("--explain", action="store_true", help="print the plan of each list's statement")
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.sizes.split(",") if size)
    with _database(args.database_url) as url:
        _setup_django(url)
        try:
            run(sizes, args.live, explain=args.explain)
        finally:
            from django.db import connections

            connections.close_all()


if __name__ == "__main__":
    main()

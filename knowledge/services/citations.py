"""The citation log and its roll-ups: one event per marker of a stored answer, and the hourly close
of the log's open slice into the totals (docs/ARCHITECTURE.md §6)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Max

from collab import clock
from knowledge.answers import Citation
from knowledge.models import CitationEvent, CitationEventChunk, CitationRollup, CitationTotal


def record_citations(
    *,
    citations: Sequence[Citation],
    origin_kind: str,
    origin_id: str,
    cited_by: str,
    message_id: str,
) -> int:
    """Appends one event per marker of the answer `message_id` (with its chunk rows); returns how
    many were new.

    One insert per table: the events' insert skips the markers this origin already recorded for
    this answer (its unique key, conflicts ignored) and returns the new rows, whose chunk rows are
    the second insert. Recording an answer again, even concurrently, therefore never counts twice;
    the first recording of a marker stands.
    """
    if origin_kind not in CitationEvent.OriginKind.values:
        raise ValueError(f"origin_kind must be one of {CitationEvent.OriginKind.values}, not {origin_kind!r}.")
    by_marker = {citation.marker: citation for citation in reversed(citations) if citation.marker > 0}
    if not by_marker:
        return 0
    with transaction.atomic():
        _slice_lock(exclusive=False)
        fresh = _insert_events(by_marker, origin_kind, origin_id, cited_by, message_id)
        CitationEventChunk.objects.bulk_create(
            CitationEventChunk(event_id=event_id, chunk_id=chunk_id)
            for event_id, marker in fresh
            for chunk_id in dict.fromkeys(by_marker[marker].source_chunk_ids)
        )
    return len(fresh)


def _slice_lock(*, exclusive: bool) -> None:
    """Event writers share CitationRollup.WRITERS_LOCK until they commit; the close holds it alone,
    so no event drawn before a close commits after it (why an advisory lock: see CitationRollup).

    SQLite needs nothing: its write transactions start IMMEDIATE and so run one at a time.
    """
    if connection.vendor == "postgresql":
        function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {function}(%s)", [CitationRollup.WRITERS_LOCK])


def _insert_events(
    by_marker: dict[int, Citation], origin_kind: str, origin_id: str, cited_by: str, message_id: str
) -> list[tuple[int, int]]:
    """`INSERT ... ON CONFLICT DO NOTHING RETURNING id, marker` (PostgreSQL and SQLite >= 3.35)."""
    moment = connection.ops.adapt_datetimefield_value(clock.now())
    markers = sorted(by_marker)
    rows = [
        (by_marker[m].collection_id, by_marker[m].document_id, origin_kind, origin_id, cited_by, m, message_id, moment)
        for m in markers
    ]
    values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s)"] * len(rows))
    sql = (
        f"INSERT INTO {CitationEvent._meta.db_table} "
        "(collection_id, document_id, origin_kind, origin_id, cited_by, marker, message_id, created_at) "
        f"VALUES {values} ON CONFLICT (origin_kind, origin_id, message_id, marker) DO NOTHING RETURNING id, marker"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [value for row in rows for value in row])
        return sorted(cursor.fetchall(), key=lambda row: row[1])


@dataclass(frozen=True)
class SliceClose:
    closed: bool
    events: int
    closed_through: int


def _rollup_locked() -> CitationRollup:
    """The rollup row, held FOR UPDATE: one close or rebuild at a time; event writers do not wait."""
    rollup, _ = CitationRollup.objects.select_for_update().get_or_create(pk=CitationRollup.ROW)
    return rollup


def _add_closed_slice(*, after: int, through: int) -> None:
    """Adds the aggregates of events `after < id <= through` to the totals: three set-based upserts."""
    if through <= after:
        return
    totals, events, refs = (
        CitationTotal._meta.db_table,
        CitationEvent._meta.db_table,
        CitationEventChunk._meta.db_table,
    )
    upsert = f"ON CONFLICT (scope, key) DO UPDATE SET cited = {totals}.cited + excluded.cited"
    with connection.cursor() as cursor:
        for scope, column, table, id_column in (
            (CitationTotal.Scope.COLLECTION, "collection_id", events, "id"),
            (CitationTotal.Scope.DOCUMENT, "document_id", events, "id"),
            (CitationTotal.Scope.CHUNK, "chunk_id", refs, "event_id"),
        ):
            cursor.execute(
                f"INSERT INTO {totals} (scope, key, cited) SELECT %s, {column}, COUNT(*) FROM {table} "
                f"WHERE {id_column} > %s AND {id_column} <= %s GROUP BY {column} {upsert}",
                [str(scope), after, through],
            )


SLICE_HOURS = 1


@transaction.atomic
def citation_slices_close() -> SliceClose:
    """Closes the open slice of the citation log at most once per clock hour (the worker calls this
    every pass): its aggregates join the totals and the boundary moves to the last event id.

    Cheap when there is nothing to do (one locked read). Closing an empty slice only moves the time.
    Event writers wait while a slice closes: the time of an hour's aggregates (bench/citations.py).
    """
    rollup = _rollup_locked()
    moment = clock.now()
    hour = moment.replace(minute=0, second=0, microsecond=0)
    if rollup.closed_at is not None and rollup.closed_at >= hour:
        return SliceClose(closed=False, events=0, closed_through=rollup.closed_through)
    _slice_lock(exclusive=True)
    last = CitationEvent.objects.aggregate(last=Max("id"))["last"] or 0
    through = max(last, rollup.closed_through)
    _add_closed_slice(after=rollup.closed_through, through=through)
    events = CitationEvent.objects.filter(id__gt=rollup.closed_through, id__lte=through).count()
    rollup.closed_through, rollup.closed_at, rollup.slices = through, moment, rollup.slices + 1
    rollup.save()
    return SliceClose(closed=True, events=events, closed_through=through)


@transaction.atomic
def citation_totals_rebuild() -> SliceClose:
    """Recounts the closed slices from the log (the boundary stays): repairs anything a hand did."""
    rollup = _rollup_locked()
    CitationTotal.objects.all().delete()
    _add_closed_slice(after=0, through=rollup.closed_through)
    events = CitationEvent.objects.filter(id__lte=rollup.closed_through).count()
    return SliceClose(closed=False, events=events, closed_through=rollup.closed_through)

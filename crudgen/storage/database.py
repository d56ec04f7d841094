"""Storage on the project database: crudgen's resources and revisions tables, queried in SQL."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.models import BooleanField, Count, Expression, F, OrderBy, Q, QuerySet, Sum, Value

from crudgen.access import ListScope
from crudgen.errors import DuplicateResource
from crudgen.filters import FilterableField
from crudgen.metadata import ResourceMeta, Revision
from crudgen.models import NamespaceTally, StoredResource, StoredRevision
from crudgen.storage.base import Storage, Stored
from crudgen.types import DataFilter, ListQueryParams, SortOrder

_META_COLUMNS = (
    "resource_id",
    "current_revision_id",
    "is_deleted",
    "created_time",
    "updated_time",
    "created_by",
    "updated_by",
    "revision_count",
    "schema_version",
)
_REVISION_COLUMNS = (
    "revision_id",
    "parent_revision_id",
    "number",
    "data",
    "schema_version",
    "created_time",
    "created_by",
)
_NULLABLE_SORTS = {"created_by", "updated_by"}
TALLY_SLOTS = 8


def _tally_upsert_sql(connection: Any, rows: str = "VALUES (%s, %s, %s, %s)") -> str:
    """Adds to a slot, creating it on first use, in one statement (PostgreSQL and SQLite >= 3.24).

    `rows` yields (namespace, slot, live, deleted): a VALUES list or a SELECT.
    """
    q = connection.ops.quote_name
    table = q(NamespaceTally._meta.db_table)
    return (
        f"INSERT INTO {table} ({q('namespace')}, {q('slot')}, {q('live')}, {q('deleted')}) {rows} "
        f"ON CONFLICT ({q('namespace')}, {q('slot')}) DO UPDATE SET "
        f"{q('live')} = {table}.{q('live')} + excluded.{q('live')}, "
        f"{q('deleted')} = {table}.{q('deleted')} + excluded.{q('deleted')}"
    )


def _tally(using: str, namespace: str, *, live: int = 0, deleted: int = 0) -> None:
    """Adds to one random slot of the namespace's tally, inside the caller's transaction."""
    if not live and not deleted:
        return
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(_tally_upsert_sql(connection), [namespace, random.randrange(TALLY_SLOTS), live, deleted])


def _tally_of_flip(using: str, namespace: str, *, was_deleted: bool | None, is_deleted: bool | None) -> None:
    """Moves one resource between the tally's columns (None: it did not or does not exist)."""
    live = int(is_deleted is False) - int(was_deleted is False)
    deleted = int(is_deleted is True) - int(was_deleted is True)
    _tally(using, namespace, live=live, deleted=deleted)


def _flag(value: bool) -> Value:
    """A boolean compared with `=`: Django writes `NOT is_deleted` for a plain False, and SQLite
    cannot use an index column behind NOT, so every list would sort the whole namespace."""
    return Value(value, output_field=BooleanField())


def data_value_sql(field: FilterableField, vendor: str, column: str) -> str:
    """The SQL of one data field, written out whole (no parameters): SQLite uses an expression
    index only where the query repeats its expression word for word.

    PostgreSQL: strings as text in the "C" collation (code point order, as in Python), other
    kinds as jsonb, whose numbers compare numerically. SQLite: `json_extract`, which gives
    numbers as numbers and strings as text compared byte by byte.
    """
    if vendor == "postgresql":
        if field.kind == "str":
            return f"(({column} ->> '{field.name}') COLLATE \"C\")"
        return f"({column} -> '{field.name}')"
    return f"json_extract({column}, '$.{field.name}')"


class DataCondition(Expression):
    """One checked data filter as a WHERE condition on a resource's current data."""

    conditional = True
    output_field = BooleanField()

    def __init__(self, data_filter: DataFilter, field: FilterableField) -> None:
        super().__init__(output_field=BooleanField())
        self.data_filter = data_filter
        self.data_field = field

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        q = connection.ops.quote_name
        column = f"{q(StoredResource._meta.db_table)}.{q('data')}"
        vendor, lookup, wanted = connection.vendor, self.data_filter.lookup, self.data_filter.value
        value = data_value_sql(self.data_field, vendor, column)
        if lookup == "isnull":
            # `->>` reads JSON null as SQL NULL, whatever the field's kind.
            nullable = f"({column} ->> '{self.data_field.name}')" if vendor == "postgresql" else value
            return f"{nullable} IS {'' if wanted else 'NOT '}NULL", []
        if lookup == "contains":
            text = f"({column} ->> '{self.data_field.name}')" if vendor == "postgresql" else value
            function = "strpos" if vendor == "postgresql" else "instr"
            return f"{function}({text}, %s) > 0", [wanted]
        placeholder, adapt = self._parameter(vendor)
        if lookup == "exact":
            return f"{value} = {placeholder}", [adapt(wanted)]
        if lookup == "in":
            return f"{value} IN ({', '.join([placeholder] * len(wanted))})", [adapt(item) for item in wanted]
        bounds = [(op, bound) for op, bound in zip((">=", "<="), wanted, strict=True) if bound is not None]
        return " AND ".join(f"{value} {op} {placeholder}" for op, _ in bounds), [adapt(b) for _, b in bounds]

    def _parameter(self, vendor: str) -> tuple[str, Any]:
        if vendor == "postgresql" and self.data_field.kind != "str":
            return "%s::jsonb", json.dumps
        return "%s", lambda value: value


def _stored(row: StoredResource) -> Stored:
    return Stored(ResourceMeta(**{name: getattr(row, name) for name in _META_COLUMNS}), row.data)


def _revision(row: StoredRevision, resource_id: str) -> Revision:
    return Revision(resource_id=resource_id, **{name: getattr(row, name) for name in _REVISION_COLUMNS})


def _revision_row(revision: Revision, resource: StoredResource) -> StoredRevision:
    return StoredRevision(resource=resource, **{name: getattr(revision, name) for name in _REVISION_COLUMNS})


@dataclass
class _RowSession:
    row: StoredResource
    current: Stored

    def revision(self, revision_id: str) -> Revision | None:
        found = StoredRevision.objects.filter(resource=self.row, revision_id=revision_id).first()
        return _revision(found, self.row.resource_id) if found else None

    def save(self, meta: ResourceMeta, data: dict[str, Any], new_revision: Revision | None = None) -> None:
        _tally_of_flip(
            self.row._state.db or "default",
            self.row.namespace,
            was_deleted=self.current.meta.is_deleted,
            is_deleted=meta.is_deleted,
        )
        for name in _META_COLUMNS:
            setattr(self.row, name, getattr(meta, name))
        self.row.data = data
        self.row.save(update_fields=[*_META_COLUMNS[1:], "data"])
        if new_revision is not None:
            _revision_row(new_revision, self.row).save(force_insert=True)


class DjangoStorage(Storage):
    """Resources of every model share two tables, told apart by `namespace` (the resource name)."""

    def __init__(self, namespace: str | None = None, using: str = "default") -> None:
        self.namespace = namespace
        self.using = using

    def _resources(self) -> QuerySet[StoredResource]:
        if self.namespace is None:
            raise RuntimeError("DjangoStorage needs a namespace; register it with a CRUD first")
        return StoredResource.objects.using(self.using).filter(namespace=self.namespace)

    def insert(self, meta: ResourceMeta, revision: Revision, data: dict[str, Any]) -> None:
        if connections[self.using].vendor == "postgresql":
            self._insert_in_one_statement(meta, revision, data)
            return
        try:
            with transaction.atomic(using=self.using):
                row = StoredResource(
                    namespace=self.namespace, data=data, **{n: getattr(meta, n) for n in _META_COLUMNS}
                )
                row.save(force_insert=True, using=self.using)
                _revision_row(revision, row).save(force_insert=True, using=self.using)
                _tally_of_flip(self.using, self.namespace, was_deleted=None, is_deleted=meta.is_deleted)
        except IntegrityError as exc:
            raise DuplicateResource(f"resource {meta.resource_id} already exists") from exc

    def _insert_in_one_statement(self, meta: ResourceMeta, revision: Revision, data: dict[str, Any]) -> None:
        """Resource, first revision and tally in one round trip: one statement is atomic by itself,
        so a create costs what a plain model's INSERT costs, not BEGIN, three writes and COMMIT."""
        connection = connections[self.using]
        q = connection.ops.quote_name
        resource_columns = ["namespace", *_META_COLUMNS, "data"]
        sql = (
            f"WITH new_resource AS (INSERT INTO {q(StoredResource._meta.db_table)} "
            f"({', '.join(q(c) for c in resource_columns)}) "
            f"VALUES ({', '.join(['%s'] * (len(resource_columns) - 1))}, %s::jsonb) RETURNING {q('id')}), "
            f"new_revision AS (INSERT INTO {q(StoredRevision._meta.db_table)} "
            f"({q('resource_id')}, {', '.join(q(c) for c in _REVISION_COLUMNS)}) "
            f"SELECT {q('id')}, %s, %s, %s, %s::jsonb, %s, %s, %s FROM new_resource) "
            + _tally_upsert_sql(connection, rows="SELECT %s, %s, %s, %s FROM new_resource")
        )
        params: list[Any] = [self.namespace, *(getattr(meta, name) for name in _META_COLUMNS), json.dumps(data)]
        params += [json.dumps(revision.data) if c == "data" else getattr(revision, c) for c in _REVISION_COLUMNS]
        params += [self.namespace, random.randrange(TALLY_SLOTS), int(not meta.is_deleted), int(meta.is_deleted)]
        # Alone it runs in autocommit; inside a caller's transaction a savepoint keeps a
        # duplicate from aborting that transaction.
        scope = transaction.atomic(using=self.using) if connection.in_atomic_block else nullcontext()
        try:
            with scope, connection.cursor() as cursor:
                cursor.execute(sql, params)
        except IntegrityError as exc:
            raise DuplicateResource(f"resource {meta.resource_id} already exists") from exc

    def fetch(self, resource_id: str) -> Stored | None:
        row = self._resources().filter(resource_id=resource_id).first()
        return _stored(row) if row else None

    def fetch_revision(self, resource_id: str, revision_id: str) -> Revision | None:
        row = (
            StoredRevision.objects.using(self.using)
            .filter(resource__namespace=self.namespace, resource__resource_id=resource_id, revision_id=revision_id)
            .first()
        )
        return _revision(row, resource_id) if row else None

    def atomic(self) -> AbstractContextManager[None]:
        return transaction.atomic(using=self.using)

    @contextmanager
    def locked(self, resource_id: str) -> Iterator[_RowSession | None]:
        # The row lock is taken before the current revision is read, so a concurrent writer waits and
        # then builds on our revision instead of both writing siblings of the same parent.
        with transaction.atomic(using=self.using):
            row = self._resources().select_for_update().filter(resource_id=resource_id).first()
            yield _RowSession(row, _stored(row)) if row else None

    def _scoped(self, is_deleted: bool | None, scope: ListScope | None) -> QuerySet[StoredResource]:
        rows = self._resources()
        if is_deleted is not None:
            rows = rows.filter(is_deleted=_flag(is_deleted))
        if scope is not None and scope.created_by is not None:
            # One creator (the usual scope) is an equality, so the page is a walk of the scope index.
            creators = sorted(scope.created_by)
            rows = rows.filter(created_by=creators[0]) if len(creators) == 1 else rows.filter(created_by__in=creators)
        return rows

    def _with_data_filters(
        self, rows: QuerySet[StoredResource], data_filters: Sequence[DataFilter]
    ) -> QuerySet[StoredResource]:
        for data_filter in data_filters:
            rows = rows.filter(DataCondition(data_filter, self.data_fields[data_filter.field]))
        return rows

    def _filtered(
        self, params: ListQueryParams, is_deleted: bool | None, scope: ListScope | None
    ) -> QuerySet[StoredResource]:
        rows = self._with_data_filters(self._scoped(is_deleted, scope), params.data_filters)
        if params.created_by_filter:
            rows = rows.filter(created_by__in=params.created_by_filter)
        if params.updated_by_filter:
            rows = rows.filter(updated_by__in=params.updated_by_filter)
        for column, bounds in (
            ("created_time", params.created_time_range),
            ("updated_time", params.updated_time_range),
        ):
            start, end = bounds or (None, None)
            if start is not None:
                rows = rows.filter(**{f"{column}__gte": start})
            if end is not None:
                rows = rows.filter(**{f"{column}__lte": end})
        return rows

    @staticmethod
    def _ordering(params: ListQueryParams) -> list[OrderBy]:
        column = params.sort_by or "created_time"
        descending = params.sort_order == SortOrder.DESC
        # Explicit null placement only where nulls can occur, so time sorts stay plain index scans;
        # it matches the in-memory backends (nulls last ascending, first descending).
        nulls = {"nulls_first": True} if descending else {"nulls_last": True}
        extra = nulls if column in _NULLABLE_SORTS else {}
        primary = F(column).desc(**extra) if descending else F(column).asc(**extra)
        tie = F("resource_id").desc() if descending else F("resource_id").asc()
        return [primary, tie]

    def _tallied_total(self, is_deleted: bool | None) -> int:
        sums = (
            NamespaceTally.objects.using(self.using)
            .filter(namespace=self.namespace)
            .aggregate(live=Sum("live"), deleted=Sum("deleted"))
        )
        live, deleted = sums["live"] or 0, sums["deleted"] or 0
        if is_deleted is None:
            return live + deleted
        return deleted if is_deleted else live

    def recount(self) -> None:
        """Rebuilds the namespace's tally from its rows (after rows were written around the storage)."""
        with transaction.atomic(using=self.using):
            NamespaceTally.objects.using(self.using).filter(namespace=self.namespace).delete()
            counts = self._resources().aggregate(
                live=Count("pk", filter=Q(is_deleted=False)), deleted=Count("pk", filter=Q(is_deleted=True))
            )
            NamespaceTally.objects.using(self.using).create(namespace=self.namespace, slot=0, **counts)

    def select(
        self, params: ListQueryParams, is_deleted: bool | None, scope: ListScope | None = None
    ) -> tuple[list[Stored], int]:
        rows = self._filtered(params, is_deleted, scope)
        scoped = scope is not None and not scope.is_everything
        filtered = scoped or params.created_by_filter or params.updated_by_filter or params.data_filters
        ranged = params.created_time_range or params.updated_time_range
        total = rows.count() if filtered or ranged else self._tallied_total(is_deleted)
        if total <= params.offset:
            return [], total
        page = rows.order_by(*self._ordering(params))[params.offset : params.offset + params.page_size]
        return [_stored(row) for row in page], total

    def count(
        self, is_deleted: bool | None = False, scope: ListScope | None = None, data_filters: Sequence[DataFilter] = ()
    ) -> int:
        if (scope is None or scope.is_everything) and not data_filters:
            return self._tallied_total(is_deleted)
        # One caller's part (an index range count on (namespace, is_deleted, created_by)) or the
        # rows passing data filters (an index range count where the field is indexed).
        return self._with_data_filters(self._scoped(is_deleted, scope), data_filters).count()

    def index_sql(self, field: FilterableField, vendor: str) -> tuple[str, str]:
        """(name, CREATE INDEX statement) of one indexed data field: led by the namespace and the
        deleted flag like every list query, ending in the default sort, so a filtered page is an
        index walk and its count an index range count."""
        q = connections[self.using].ops.quote_name
        digest = hashlib.sha1(f"{self.namespace}:{field.name}".encode(), usedforsecurity=False).hexdigest()[:12]
        name = f"crudgen_dx_{digest}"
        value = data_value_sql(field, vendor, q("data"))
        columns = f"{q('namespace')}, {q('is_deleted')}, {value}, {q('created_time')}, {q('resource_id')}"
        return name, f"CREATE INDEX IF NOT EXISTS {q(name)} ON {q(StoredResource._meta.db_table)} ({columns})"

    def ensure_indexes(self, using: str | None = None) -> list[str]:
        """Create the indexes of this namespace's indexed data fields where missing (idempotent)."""
        if using is not None and using != self.using:
            return []
        connection = connections[self.using]
        names = []
        with connection.cursor() as cursor:
            for name in self.indexed_fields:
                index_name, statement = self.index_sql(self.data_fields[name], connection.vendor)
                cursor.execute(statement)
                names.append(index_name)
        return names

    def revisions(self, resource_id: str, offset: int, limit: int) -> tuple[list[Revision], int]:
        rows = StoredRevision.objects.using(self.using).filter(
            resource__namespace=self.namespace, resource__resource_id=resource_id
        )
        total = rows.count()
        page = rows.order_by("-number")[offset : offset + limit] if total > offset else []
        return [_revision(row, resource_id) for row in page], total

    def export(self) -> Iterator[tuple[Stored, list[Revision]]]:
        rows = self._resources().order_by("created_time", "resource_id").prefetch_related("revisions")
        for row in rows.iterator(chunk_size=200):
            history = sorted(row.revisions.all(), key=lambda r: r.number)
            yield _stored(row), [_revision(revision, row.resource_id) for revision in history]

    def replace(self, stored: Stored, revisions: list[Revision]) -> None:
        with transaction.atomic(using=self.using):
            previous = self._resources().select_for_update().filter(resource_id=stored.meta.resource_id)
            was_deleted = previous.values_list("is_deleted", flat=True).first()
            _tally_of_flip(self.using, self.namespace, was_deleted=was_deleted, is_deleted=stored.meta.is_deleted)
            previous.delete()
            row = StoredResource(
                namespace=self.namespace, data=stored.data, **{n: getattr(stored.meta, n) for n in _META_COLUMNS}
            )
            row.save(force_insert=True, using=self.using)
            StoredRevision.objects.using(self.using).bulk_create([_revision_row(r, row) for r in revisions])

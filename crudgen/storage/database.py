"""Storage on the project database: crudgen's resources and revisions tables, queried in SQL."""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.models import BooleanField, Count, Expression, F, OrderBy, Q, QuerySet, Sum, Value

from crudgen.access import ListScope
from crudgen.errors import DuplicateResource
from crudgen.filters import FilterableField
from crudgen.metadata import ResourceMeta, Revision
from crudgen.models import NamespaceTally, StoredResource, StoredRevision
from crudgen.storage.base import StaleState, Storage, Stored, T, WriteSession
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
# Checked besides xmin by an optimistic write: every write through crudgen changes one of them (and
# the update time), so not even a transaction id reused after a wraparound can pass off a changed
# row as the version a write was decided on.
_VERSION_CHECKED_COLUMNS = ("current_revision_id", "revision_count", "is_deleted", "updated_time")
TALLY_SLOTS = 8
# Optimistic tries of one write before it queues on the row lock instead (PostgreSQL).
OPTIMISTIC_ATTEMPTS = 3
# Resource states a DjangoStorage remembers per process, so a write on one of them skips its read.
REMEMBERED_STATES = 1024


Quote = Callable[[str], str]


def _tally_upsert_sql(q: Quote, rows: str = "VALUES (%s, %s, %s, %s)") -> str:
    """Adds to a slot, creating it on first use, in one statement (PostgreSQL and SQLite >= 3.24).

    `rows` yields (namespace, slot, live, deleted): a VALUES list or a SELECT.
    """
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
        sql = _tally_upsert_sql(connection.ops.quote_name)
        cursor.execute(sql, [namespace, random.randrange(TALLY_SLOTS), live, deleted])


def _tally_delta(*, was_deleted: bool | None, is_deleted: bool | None) -> tuple[int, int]:
    """(live, deleted) change of one resource moving between the tally's columns (None: it did not or
    does not exist)."""
    return int(is_deleted is False) - int(was_deleted is False), int(is_deleted is True) - int(was_deleted is True)


def _tally_of_flip(using: str, namespace: str, *, was_deleted: bool | None, is_deleted: bool | None) -> None:
    live, deleted = _tally_delta(was_deleted=was_deleted, is_deleted=is_deleted)
    _tally(using, namespace, live=live, deleted=deleted)


def _revision_insert_sql(q: Quote, source: str) -> str:
    """Inserts one revision of the resource whose `id` the CTE `source` returns (none if it returns none)."""
    columns = ", ".join(q(c) for c in ("resource_id", *_REVISION_COLUMNS))
    return (
        f"INSERT INTO {q(StoredRevision._meta.db_table)} ({columns}) "
        f"SELECT {q('id')}, %s, %s, %s, %s::jsonb, %s, %s, %s FROM {source}"
    )


def _insert_sql(q: Quote) -> str:
    resource_columns = ["namespace", *_META_COLUMNS, "data"]
    return (
        f"WITH new_resource AS (INSERT INTO {q(StoredResource._meta.db_table)} "
        f"({', '.join(q(c) for c in resource_columns)}) "
        f"VALUES ({', '.join(['%s'] * (len(resource_columns) - 1))}, %s::jsonb) RETURNING {q('id')}, xmin), "
        f"new_revision AS ({_revision_insert_sql(q, 'new_resource')}), "
        f"tally AS ({_tally_upsert_sql(q, rows='SELECT %s, %s, %s, %s FROM new_resource')}) "
        f"SELECT {q('id')}, xmin::text FROM new_resource"
    )


def _read_version_sql(q: Quote, versioned: bool) -> str:
    return (
        f"SELECT {q('id')}, {'xmin::text' if versioned else 'NULL'}, {', '.join(q(c) for c in _META_COLUMNS)}, "
        f"{q('data')} "
        f"FROM {q(StoredResource._meta.db_table)} WHERE {q('namespace')} = %s AND {q('resource_id')} = %s"
    )


def _save_over_sql(q: Quote, switched: bool, with_revision: bool, with_tally: bool) -> str:
    """The conditional write of `DjangoStorage._save_over`; its parameters come in this order:
    [pk, revision id if switched], the new metadata, [data unless switched], pk, xmin and the
    checked columns of the version, [the revision's columns], [the tally's four values]."""
    ctes = []
    if switched:
        ctes.append(
            f"target AS (SELECT {q('data')} FROM {q(StoredRevision._meta.db_table)} "
            f"WHERE {q('resource_id')} = %s AND {q('revision_id')} = %s)"
        )
    assignments = ", ".join(f"{q(c)} = %s" for c in _META_COLUMNS[1:])
    ctes.append(
        f"changed AS (UPDATE {q(StoredResource._meta.db_table)} AS r SET {assignments}, "
        + (f"{q('data')} = target.{q('data')} FROM target " if switched else f"{q('data')} = %s::jsonb ")
        + f"WHERE r.{q('id')} = %s AND r.xmin = %s::xid "
        + "".join(f"AND r.{q(c)} = %s " for c in _VERSION_CHECKED_COLUMNS)
        + f"RETURNING r.{q('id')}, r.xmin"
        + (f", r.{q('data')})" if switched else ")")
    )
    if with_revision:
        ctes.append(f"new_revision AS ({_revision_insert_sql(q, 'changed')})")
    if with_tally:
        ctes.append(f"tally AS ({_tally_upsert_sql(q, rows='SELECT %s, %s, %s, %s FROM changed')})")
    outcome = f"(SELECT {q('data')} FROM changed), EXISTS (SELECT 1 FROM target)" if switched else "NULL, TRUE"
    return f"WITH {', '.join(ctes)} SELECT (SELECT xmin::text FROM changed), {outcome}"


def _update_sql(q: Quote) -> str:
    """A write under the database's write lock (SQLite): the row as `_save_over_sql` sets it."""
    assignments = ", ".join(f"{q(c)} = %s" for c in (*_META_COLUMNS[1:], "data"))
    return f"UPDATE {q(StoredResource._meta.db_table)} SET {assignments} WHERE {q('id')} = %s"


def _revision_values_sql(q: Quote) -> str:
    columns = ("resource_id", *_REVISION_COLUMNS)
    return (
        f"INSERT INTO {q(StoredRevision._meta.db_table)} ({', '.join(q(c) for c in columns)}) "
        f"VALUES ({', '.join(['%s'] * len(columns))})"
    )


_STATEMENTS: dict[tuple[Any, ...], str] = {}


def _statement(connection: Any, build: Callable[..., str], *shape: bool) -> str:
    """`build(quote_name, *shape)`, built once per database vendor: quoting the names anew on every
    write would cost more than PostgreSQL spends running the statement."""
    key = (connection.vendor, build.__name__, *shape)
    sql = _STATEMENTS.get(key)
    if sql is None:
        sql = _STATEMENTS[key] = build(connection.ops.quote_name, *shape)
    return sql


def _params(ops: Any, record: ResourceMeta | Revision, columns: tuple[str, ...]) -> list[Any]:
    """The values of `columns` as the database takes them (SQLite: times as naive UTC text, as Django writes them)."""
    values = [getattr(record, c) for c in columns]
    return [ops.adapt_datetimefield_value(v) if isinstance(v, datetime) else v for v in values]


def _revision_params(ops: Any, revision: Revision, data: dict[str, Any] | None, data_json: str | None) -> list[Any]:
    """The revision's columns; its data is serialized once only when it is the resource's `data`."""
    text = data_json if data_json is not None and revision.data is data else json.dumps(revision.data)
    values = _params(ops, revision, _REVISION_COLUMNS)
    return [text if c == "data" else value for c, value in zip(_REVISION_COLUMNS, values, strict=True)]


def _json_text(value: Any) -> str:
    """jsonb as read by a raw cursor: Django's PostgreSQL backends load it as text (psycopg 2 and 3)."""
    return value if isinstance(value, str) else json.dumps(value)


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


def _revision_of(using: str, pk: int, resource_id: str, revision_id: str) -> Revision | None:
    found = StoredRevision.objects.using(using).filter(resource_id=pk, revision_id=revision_id).first()
    return _revision(found, resource_id) if found else None


@dataclass(frozen=True)
class _Version:
    """A resource as one version of its row holds it: the row's id and `xmin` (the transaction that
    wrote this version; any later write of the row changes it), its metadata, its data as JSON text."""

    pk: int
    xmin: str
    meta: ResourceMeta
    data_json: str

    def stored(self) -> Stored:
        """A private copy: whoever gets it may change it without touching what is remembered."""
        return Stored(self.meta.evolve(), json.loads(self.data_json))


class _RememberedStates:
    """The latest row versions this process read or wrote, at most `capacity`, least recent dropped first.

    Only a hint: a write decided on one stores nothing if the row has changed since.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._versions: OrderedDict[str, _Version] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, resource_id: str) -> _Version | None:
        with self._lock:
            version = self._versions.get(resource_id)
            if version is not None:
                self._versions.move_to_end(resource_id)
            return version

    def put(self, version: _Version) -> None:
        if self.capacity <= 0:
            return
        with self._lock:
            self._versions[version.meta.resource_id] = version
            self._versions.move_to_end(version.meta.resource_id)
            while len(self._versions) > self.capacity:
                self._versions.popitem(last=False)

    def forget(self, resource_id: str) -> None:
        with self._lock:
            self._versions.pop(resource_id, None)


@dataclass
class _VersionSession:
    """A write decided on one row version; a save stores nothing unless that version is still current."""

    storage: DjangoStorage
    version: _Version
    current: Stored = field(init=False)
    saved: bool = False

    def __post_init__(self) -> None:
        self.current = self.version.stored()

    def revision(self, revision_id: str) -> Revision | None:
        return _revision_of(self.storage.using, self.version.pk, self.version.meta.resource_id, revision_id)

    def save(self, meta: ResourceMeta, data: dict[str, Any], new_revision: Revision | None = None) -> None:
        self.saved = self.storage._save_over(self.version, meta, data, new_revision)

    def save_switched(self, meta: ResourceMeta) -> bool:
        self.saved = self.storage._save_over(self.version, meta, None)
        return self.saved


@dataclass
class _RowSession:
    """A write under the row lock (`DjangoStorage.locked`)."""

    row: StoredResource
    current: Stored

    def revision(self, revision_id: str) -> Revision | None:
        return _revision_of(self.row._state.db or "default", self.row.pk, self.row.resource_id, revision_id)

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
    """Resources of every model share two tables, told apart by `namespace` (the resource name).

    On PostgreSQL every write is one statement when this process remembers the resource's state
    (it created, read or wrote it lately; `remembered_states` of them, 0 for none), else a read and
    that statement; see `write`.
    """

    def __init__(
        self, namespace: str | None = None, using: str = "default", remembered_states: int = REMEMBERED_STATES
    ) -> None:
        self.namespace = namespace
        self.using = using
        self._remembered = _RememberedStates(remembered_states)

    def _checked_namespace(self) -> str:
        if self.namespace is None:
            raise RuntimeError("DjangoStorage needs a namespace; register it with a CRUD first")
        return self.namespace

    def _resources(self) -> QuerySet[StoredResource]:
        return StoredResource.objects.using(self.using).filter(namespace=self._checked_namespace())

    @property
    def _versioned(self) -> bool:
        """Rows carry a version a statement can check (PostgreSQL's `xmin`), so writes go optimistic."""
        return connections[self.using].vendor == "postgresql"

    @property
    def _raw_sql(self) -> bool:
        """Reads and writes one row in SQL of their own (PostgreSQL and SQLite), not through the ORM."""
        return connections[self.using].vendor in ("postgresql", "sqlite")

    def _execute_one(self, sql: str, params: list[Any]) -> tuple[Any, ...]:
        """One statement, atomic by itself; inside a caller's transaction it runs in a savepoint, so
        that its failure (a duplicate, a value PostgreSQL refuses) does not abort that transaction."""
        connection = connections[self.using]
        scope = transaction.atomic(using=self.using) if connection.in_atomic_block else nullcontext()
        with scope, connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()

    def _remember(self, version: _Version) -> None:
        # Not from inside a transaction: it may roll back, and until it ends every row it writes
        # carries the same xmin, so a version would not tell two of its writes apart.
        if version.xmin is not None and not connections[self.using].in_atomic_block:
            self._remembered.put(version)

    def _remembered_version(self, resource_id: str) -> _Version | None:
        return None if connections[self.using].in_atomic_block else self._remembered.get(resource_id)

    def insert(self, meta: ResourceMeta, revision: Revision, data: dict[str, Any]) -> None:
        if self._versioned:
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
        data_json = json.dumps(data)
        params: list[Any] = [self.namespace, *_params(connection.ops, meta, _META_COLUMNS), data_json]
        params += _revision_params(connection.ops, revision, data, data_json)
        params += [self.namespace, random.randrange(TALLY_SLOTS), int(not meta.is_deleted), int(meta.is_deleted)]
        try:
            pk, xmin = self._execute_one(_statement(connection, _insert_sql), params)
        except IntegrityError as exc:
            raise DuplicateResource(f"resource {meta.resource_id} already exists") from exc
        self._remember(_Version(pk, xmin, meta.evolve(), data_json))

    def _read_version(self, resource_id: str) -> _Version | None:
        """The row as it is now (on PostgreSQL with its version, remembered for later writes): one
        indexed lookup."""
        connection = connections[self.using]
        sql = _statement(connection, _read_version_sql, self._versioned)
        with connection.cursor() as cursor:
            cursor.execute(sql, [self._checked_namespace(), resource_id])
            row = cursor.fetchone()
        if row is None:
            return None
        # SQLite hands times back naive; Django stores them in UTC.
        values = [v.replace(tzinfo=UTC) if isinstance(v, datetime) and v.tzinfo is None else v for v in row[2:-1]]
        meta = ResourceMeta(**dict(zip(_META_COLUMNS, values, strict=True)))
        version = _Version(row[0], row[1], meta, _json_text(row[-1]))
        self._remember(version)
        return version

    def _save_over(
        self, version: _Version, meta: ResourceMeta, data: dict[str, Any] | None, new_revision: Revision | None = None
    ) -> bool:
        """Stores `meta` with `data` (None: the data of revision `meta.current_revision_id`) and
        `new_revision` if the row is still at `version`, in one statement with its tally change.

        Raises StaleState (nothing stored) if the row has changed; False if the revision is missing.
        """
        if not self._versioned:
            return self._save_under_write_lock(version, meta, data, new_revision)
        switched = data is None
        if switched and len(meta.current_revision_id) > StoredRevision._meta.get_field("revision_id").max_length:
            # No revision has such an id; the statement would fail storing it (a DataError, 422), not say so.
            return False
        ops = connections[self.using].ops
        data_json = None if switched else json.dumps(data)
        params: list[Any] = [version.pk, meta.current_revision_id] if switched else []
        params += _params(ops, meta, _META_COLUMNS[1:])
        params += [] if switched else [data_json]
        params += [version.pk, version.xmin, *_params(ops, version.meta, _VERSION_CHECKED_COLUMNS)]
        if new_revision is not None:
            params += _revision_params(ops, new_revision, data, data_json)
        live, deleted = _tally_delta(was_deleted=version.meta.is_deleted, is_deleted=meta.is_deleted)
        if live or deleted:
            params += [self.namespace, random.randrange(TALLY_SLOTS), live, deleted]
        shape = (switched, new_revision is not None, bool(live or deleted))
        sql = _statement(connections[self.using], _save_over_sql, *shape)
        xmin, switched_data, revision_exists = self._execute_one(sql, params)
        if xmin is None:
            if not revision_exists:
                return False
            raise StaleState(f"{self.namespace} {meta.resource_id} changed after its state was read")
        self._remember(_Version(version.pk, xmin, meta.evolve(), data_json or _json_text(switched_data)))
        return True

    def _save_under_write_lock(
        self, version: _Version, meta: ResourceMeta, data: dict[str, Any] | None, new_revision: Revision | None
    ) -> bool:
        """`_save_over` on SQLite: the write's transaction holds the database's write lock since its
        read (BEGIN IMMEDIATE), so the row is still at `version` and plain statements do."""
        if data is None:
            target = _revision_of(self.using, version.pk, meta.resource_id, meta.current_revision_id)
            if target is None:
                return False
            data = target.data
        connection = connections[self.using]
        data_json = json.dumps(data)
        with connection.cursor() as cursor:
            params = [*_params(connection.ops, meta, _META_COLUMNS[1:]), data_json, version.pk]
            cursor.execute(_statement(connection, _update_sql), params)
            if new_revision is not None:
                params = [version.pk, *_revision_params(connection.ops, new_revision, data, data_json)]
                cursor.execute(_statement(connection, _revision_values_sql), params)
        _tally_of_flip(self.using, self.namespace, was_deleted=version.meta.is_deleted, is_deleted=meta.is_deleted)
        return True

    def fetch(self, resource_id: str) -> Stored | None:
        if self._raw_sql:
            version = self._read_version(resource_id)
            return version.stored() if version else None
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

    def write(self, resource_id: str, decide: Callable[[WriteSession | None], T]) -> T:
        """On PostgreSQL, optimistic: no BEGIN, row lock or COMMIT.

        `decide` runs on the state this process remembers of the resource, else on one plain read,
        and its save is one statement: an UPDATE on condition that the row is still the version
        decided on, with the new revision and the tally change. So a write on a remembered
        resource is one round trip, like a create; on another, two. If the row has changed in
        between, nothing is stored and `decide` runs again on a fresh read; so does a refusal or a
        no-op decided on a remembered state. A write that keeps being overtaken by others queues on
        the row lock after OPTIMISTIC_ATTEMPTS.

        On SQLite the read and the write run in one transaction, whose BEGIN IMMEDIATE takes the
        database's write lock first; elsewhere under the row lock (`locked`).
        """
        if not self._raw_sql:
            return super().write(resource_id, decide)
        if not self._versioned:
            with transaction.atomic(using=self.using):
                version = self._read_version(resource_id)
                return decide(_VersionSession(self, version) if version else None)
        remembered = self._remembered_version(resource_id)
        for _ in range(OPTIMISTIC_ATTEMPTS):
            version = remembered or self._read_version(resource_id)
            if version is None:
                return decide(None)
            session = _VersionSession(self, version)
            try:
                outcome = decide(session)
            except StaleState:
                remembered = None
                continue
            except Exception:
                if remembered is None:
                    raise
                remembered = None
                continue
            if remembered is not None and not session.saved:
                remembered = None
                continue
            return outcome
        self._remembered.forget(resource_id)
        with self.locked(resource_id) as locked_session:
            return decide(locked_session)

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
        total = self._total(rows, params, is_deleted, scope)
        if total <= params.offset:
            return [], total
        page = rows.order_by(*self._ordering(params))[params.offset : params.offset + params.page_size]
        return [_stored(row) for row in page], total

    def count(
        self, is_deleted: bool | None = False, scope: ListScope | None = None, params: ListQueryParams | None = None
    ) -> int:
        params = params or ListQueryParams()
        return self._total(self._filtered(params, is_deleted, scope), params, is_deleted, scope)

    def _total(
        self, rows: QuerySet[StoredResource], params: ListQueryParams, is_deleted: bool | None, scope: ListScope | None
    ) -> int:
        """The namespace's tally when nothing narrows it; else an index range count of one caller's
        part (namespace, is_deleted, created_by) or of the rows passing the filters."""
        scoped = scope is not None and not scope.is_everything
        filtered = scoped or params.created_by_filter or params.updated_by_filter or params.data_filters
        ranged = params.created_time_range or params.updated_time_range
        return rows.count() if filtered or ranged else self._tallied_total(is_deleted)

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
        self._replace(stored, revisions, seen=None)

    def replace_if_unchanged(self, stored: Stored, revisions: list[Revision], *, seen: ResourceMeta) -> bool:
        return self._replace(stored, revisions, seen=seen)

    def _replace(self, stored: Stored, revisions: list[Revision], *, seen: ResourceMeta | None) -> bool:
        """Replaces the resource, when `seen` is None or still its state (read under the row lock)."""
        self._remembered.forget(stored.meta.resource_id)
        with transaction.atomic(using=self.using):
            previous = self._resources().select_for_update().filter(resource_id=stored.meta.resource_id)
            if seen is not None:
                current = previous.first()
                if current is None or _stored(current).meta != seen:
                    return False
            was_deleted = previous.values_list("is_deleted", flat=True).first()
            _tally_of_flip(self.using, self.namespace, was_deleted=was_deleted, is_deleted=stored.meta.is_deleted)
            previous.delete()
            row = StoredResource(
                namespace=self.namespace, data=stored.data, **{n: getattr(stored.meta, n) for n in _META_COLUMNS}
            )
            row.save(force_insert=True, using=self.using)
            StoredRevision.objects.using(self.using).bulk_create([_revision_row(r, row) for r in revisions])
        return True

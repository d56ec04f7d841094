"""Model instances from the rows of hand-written SQL, converted as the ORM converts them.

The hot paths' statements are SQL (building the ORM's query took longer than running an indexed
one), and a `RawQuerySet` over them still costs more than the statement: it inspects the cursor's
columns and resolves their order on every call. `ModelRows` knows its model's columns once, so a
statement can select them in that order, also beside another model's in one row (a join), and
turns them into an instance with the same database converters the ORM applies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model
from django.db.models.expressions import Col

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=Model)
Converter = Callable[[Any, Any, BaseDatabaseWrapper], Any]


class ModelRows(Generic[M]):
    """The concrete columns of `model` in field order, and instances built from them."""

    def __init__(self, model: type[M]) -> None:
        self.model = model
        self._fields = tuple(model._meta.concrete_fields)
        self._attnames = [field.attname for field in self._fields]
        self._pk_position = self._fields.index(model._meta.pk)
        # Per database alias: (position, the column's expression, its converters) of each column
        # that has converters on that backend.
        self._converters: dict[str, list[tuple[int, Col, list[Converter]]]] = {}

    @property
    def width(self) -> int:
        return len(self._fields)

    def columns(self, alias: str = "") -> str:
        """The select list of every column, as `alias.column` (bare without an alias: a
        RETURNING), in the order `instance` reads."""
        return ", ".join(f"{alias}.{field.column}" if alias else field.column for field in self._fields)

    def instance(self, values: Sequence[Any], *, connection: BaseDatabaseWrapper) -> M:
        """An instance from one row's values of `columns` (loaded from the database, as the ORM's)."""
        converted = list(values)
        for position, expression, converters in self._converters_of(connection):
            value = converted[position]
            for convert in converters:
                value = convert(value, expression, connection)
            converted[position] = value
        return self.model.from_db(connection.alias, self._attnames, converted)

    def instance_if_any(self, values: Sequence[Any], *, connection: BaseDatabaseWrapper) -> M | None:
        """`instance`, or None for the NULLs of an outer join that found no row (no primary key)."""
        return None if values[self._pk_position] is None else self.instance(values, connection=connection)

    def _converters_of(self, connection: BaseDatabaseWrapper) -> list[tuple[int, Col, list[Converter]]]:
        known = self._converters.get(connection.alias)
        if known is None:
            # As SQLCompiler.get_converters: the backend's converters, then the field's.
            known = []
            for position, field in enumerate(self._fields):
                expression = field.get_col(self.model._meta.db_table)
                converters = connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)
                if converters:
                    known.append((position, expression, converters))
            self._converters[connection.alias] = known
        return known


def answer_later(statement: str, params: Sequence[Any], *, connection: BaseDatabaseWrapper) -> Callable[[], Any]:
    """Executes `statement` (which answers with one row, by RETURNING) and returns the reader of
    that row (None when there is none), to call once, later. In a PostgreSQL pipeline the statement
    then reaches the server together with whatever is sent after it, up to the next fetch or the
    pipeline's end: no round trip of its own. Elsewhere the row is read at once, since SQLite keeps
    a statement with RETURNING open until its row is read, and a COMMIT before that would fail."""
    cursor = connection.cursor()
    try:
        cursor.execute(statement, params)
    except BaseException:
        cursor.close()
        raise

    def answer() -> Any:
        with cursor:
            return cursor.fetchone()

    if connection.vendor != "postgresql":
        row = answer()
        return lambda: row
    return answer


def execute(connection: BaseDatabaseWrapper, statement: str, params: Sequence[Any] = ()) -> None:
    """Runs a statement whose answer nobody reads (in a pipeline: sent with the next fetch)."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


@contextmanager
def pipelined_transaction(connection: BaseDatabaseWrapper, *, durable: bool) -> Iterator[None]:
    """A PostgreSQL transaction begun by a statement in psycopg's pipeline, not by Django's
    `atomic`, where psycopg sends the BEGIN alone and waits for it (a round trip of its own):
    here the BEGIN reaches the server with the block's first statements, and each fetch sends
    what was sent before it in one round trip. The block ends it itself (COMMIT, with the writes
    whose answers are read after it by `answer_later`). A block that raises, or a statement that
    fails, rolls it all back. Not `durable`: it commits without waiting for the WAL to reach the
    disk, for writes whose loss in a crash of the database server something else recovers
    (expiry, reconciliation). The connection stays in autocommit for Django, so nothing in the block may open an
    `atomic` of its own (psycopg refuses to change autocommit inside a transaction, loudly)."""
    connection.ensure_connection()
    ended = False
    try:
        # Errors of the pipeline's statements surface when it syncs; they reach callers as Django's own.
        with connection.wrap_database_errors, connection.connection.pipeline():
            execute(connection, "BEGIN")
            if not durable:
                execute(connection, "SET LOCAL synchronous_commit TO OFF")
            yield
        ended = True
    finally:
        if not ended:
            _roll_back(connection)


def pipelines(connection: BaseDatabaseWrapper) -> bool:
    """Whether `pipelined_transaction` can run here: PostgreSQL, outside any `atomic` block."""
    return connection.vendor == "postgresql" and not connection.in_atomic_block


def _roll_back(connection: BaseDatabaseWrapper) -> None:
    """Ends a failed pipelined transaction; a connection that cannot is closed (Django opens a new
    one), so that no later statement of this thread runs inside what is left of it."""
    try:
        with connection.wrap_database_errors:
            connection.connection.rollback()
    except Exception:
        logger.exception("could not roll back a pipelined transaction; its connection is closed")
        connection.close()

"""Model instances from the rows of hand-written SQL, converted as the ORM converts them.

The hot paths' statements are SQL (building the ORM's query took longer than running an indexed
one), and a `RawQuerySet` over them still costs more than the statement: it inspects the cursor's
columns and resolves their order on every call. `ModelRows` knows its model's columns once, so a
statement can select them in that order, also beside another model's in one row (a join), and
turns them into an instance with the same database converters the ORM applies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model
from django.db.models.expressions import Col

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

    def columns(self, alias: str) -> str:
        """The select list of every column, as `alias.column`, in the order `instance` reads."""
        return ", ".join(f"{alias}.{field.column}" for field in self._fields)

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

"""Model instances from the rows of hand-written SQL, converted as the ORM converts them.

The hot paths' statements are SQL (building the ORM's query took longer than running an indexed
one), and a `RawQuerySet` over them still costs more than the statement: it inspects the cursor's
columns and resolves their order on every call. `ModelRows` knows its model's columns once, so a
statement can select them in that order, also beside another model's in one row (a join), and
turns them into an instance with the same database converters the ORM applies.
"""

from __future__ import annotations

import logging
import re
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model
from django.db.models.expressions import Col
from django.db.transaction import TransactionManagementError

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


class PlannedStatement:
    """A hot statement that the database plans once per connection rather than on every call: on
    PostgreSQL a prepared statement of the session (`PREPARE` once, then `EXECUTE`), elsewhere
    the statement itself. Planning the item's read with its live sandbox row (a join on a
    subquery) took longer than running it: 0.45 ms a call planned each time, 0.22 prepared; a
    live exec's two bookkeeping transactions took 0.2 ms less each with theirs prepared.
    A name is one statement's for the whole process (a second statement of the same name would
    run the first one's).
    Sent through Django's cursor, so it is logged, counted and wrapped as any query; a
    prepared statement outlives a rollback, so a failed transaction leaves it usable.
    `WORKSPACE_DATABASE_PREPARED_STATEMENTS` off: the statement itself, everywhere."""

    def __init__(self, name: str, statement: str) -> None:
        if "%" in statement.replace("%s", ""):
            raise ValueError(f"{name}: a planned statement's only % are its placeholders")
        if _NAMED.setdefault(name, statement) != statement:
            raise ValueError(f"{name}: another planned statement has this name")
        self.name = name
        self.statement = statement
        numbers = iter(range(1, statement.count("%s") + 1))
        self._prepare = f"PREPARE {name} AS " + re.sub(r"%s", lambda _: f"${next(numbers)}", statement)
        placeholders = ", ".join(["%s"] * statement.count("%s"))
        self._execute = f"EXECUTE {name}({placeholders})" if placeholders else f"EXECUTE {name}"

    def sql_for(self, connection: BaseDatabaseWrapper) -> str:
        """What to send on `connection` for it: on PostgreSQL its EXECUTE, prepared first where
        this session has not prepared it yet (a statement of its own, which sends what a
        `pipelined_transaction` queued before it)."""
        if connection.vendor != "postgresql" or not settings.WORKSPACE_DATABASE_PREPARED_STATEMENTS:
            return self.statement
        connection.ensure_connection()
        prepared = _PREPARED.setdefault(connection.connection, set())
        if self.name not in prepared:
            with connection.cursor() as cursor:
                cursor.execute(self._prepare)
            prepared.add(self.name)
        return self._execute

    def fetch_one(self, params: Sequence[Any], *, connection: BaseDatabaseWrapper) -> tuple[Any, ...] | None:
        return answer_later(self, params, connection=connection)()


# The statements each session (psycopg connection) has prepared; a new connection has none.
_PREPARED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_NAMED: dict[str, str] = {}


def answer_later(
    statement: str | PlannedStatement, params: Sequence[Any], *, connection: BaseDatabaseWrapper
) -> Callable[[], Any]:
    """Executes `statement` (which answers with at most one row: a SELECT, or a write's
    RETURNING) and returns the reader of that row (None when there is none), to call once, later.
    In a `pipelined_transaction` the statement then reaches the server together with whatever is
    sent after it, up to the next reader called or the transaction's end: no round trip of its
    own. Elsewhere the row is read at once, since SQLite keeps a statement with RETURNING open
    until its row is read, and a COMMIT before that would fail."""
    sql = _sql_of(statement, connection)
    batch = _batch_of(connection)
    if batch is not None:
        return batch.add(sql, params, answered=True)
    cursor = connection.cursor()
    try:
        cursor.execute(sql, params)
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


def execute(connection: BaseDatabaseWrapper, statement: str | PlannedStatement, params: Sequence[Any] = ()) -> None:
    """Runs a statement whose answer nobody reads (in a `pipelined_transaction`: sent with the next
    reader called, or with the transaction's end)."""
    sql = _sql_of(statement, connection)
    batch = _batch_of(connection)
    if batch is not None:
        batch.add(sql, params, answered=False)
        return
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _sql_of(statement: str | PlannedStatement, connection: BaseDatabaseWrapper) -> str:
    return statement.sql_for(connection) if isinstance(statement, PlannedStatement) else statement


class _Batch:
    """The statements of a pipelined transaction not sent yet. They go to the server as one query
    string (PostgreSQL's simple protocol runs each in turn and answers each), their parameters
    bound here as psycopg's client-side cursors bind Django's: one message and one wait for all of
    them, where psycopg's pipeline mode costs each statement a message, a flush and its own
    bookkeeping (about 60 µs a statement measured, more than most of these take to run)."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        from psycopg import ClientCursor

        self.connection = connection
        self._binder = ClientCursor(connection.connection)
        self._statements: list[str] = []
        self._answers: dict[int, _Answer] = {}

    def add(self, statement: str, params: Sequence[Any], *, answered: bool) -> Callable[[], Any]:
        if self.connection.in_atomic_block:
            # Its rollback would undo nothing of what is queued: the batch commits it all.
            raise _atomic_refused()
        # Bound even without parameters, as a cursor would bind them: `%%` is `%` either way.
        self._statements.append(self._binder.mogrify(statement, params))
        answer = _Answer(self)
        if answered:
            self._answers[len(self._statements) - 1] = answer
        return answer

    def send(self) -> None:
        """Sends what is pending and reads every answer owed. A statement that fails stops the
        rest (the server skips them); the error reaches the caller as Django's own, and every
        answer of the batch then raises it too."""
        statements, answers = self._statements, self._answers
        if not statements:
            return
        self._statements, self._answers = [], {}
        try:
            with self.connection.cursor() as cursor:
                cursor.execute(";\n".join(statements))
                for position in range(len(statements)):
                    if position in answers:
                        answers[position].row = cursor.fetchone()
                    if not cursor.nextset():
                        break
        except BaseException as exc:
            for answer in answers.values():
                answer.error = exc
            raise

    def abandon(self) -> None:
        """Forgets what was never sent (its transaction failed before it): a reader of it raises
        rather than sending it, which would begin a transaction that nothing ends."""
        for answer in self._answers.values():
            answer.error = TransactionManagementError("Its pipelined transaction failed before it was sent.")
        self._statements, self._answers = [], {}
        self._binder.close()

    def before_any_other_statement(self, execute: Callable, sql: str, params: Any, many: bool, context: Any) -> Any:
        """Django's execute wrapper while the batch is open: a statement run some other way (the
        ORM, a cursor of its own) waits for what was sent before it, so that it runs after it."""
        if self.connection.in_atomic_block:
            raise _atomic_refused()
        self.send()
        return execute(sql, params, many, context)


class _Answer:
    """One statement's row, read once its batch was sent (sent by the first reader to ask)."""

    _unread = object()

    def __init__(self, batch: _Batch) -> None:
        self._batch = batch
        self.row: Any = self._unread
        self.error: BaseException | None = None

    def __call__(self) -> Any:
        if self.row is self._unread and self.error is None:
            self._batch.send()
        if self.error is not None:
            raise self.error
        return self.row


_BATCH: ContextVar[_Batch | None] = ContextVar("pipelined_transaction", default=None)


def _atomic_refused() -> TransactionManagementError:
    return TransactionManagementError(
        "An atomic block (which leaves autocommit) cannot run inside a pipelined transaction."
    )


def _batch_of(connection: BaseDatabaseWrapper) -> _Batch | None:
    batch = _BATCH.get()
    return batch if batch is not None and batch.connection.alias == connection.alias else None


@contextmanager
def pipelined_transaction(connection: BaseDatabaseWrapper, *, durable: bool) -> Iterator[None]:
    """A PostgreSQL transaction begun and ended by statements sent together, not by Django's
    `atomic`, where psycopg sends the BEGIN alone and waits for it (a round trip of its own).
    `execute` and `answer_later` in the block only queue their statements: a reader called sends
    all that is queued in one round trip, and so does the block's end. So the BEGIN reaches the
    server with the block's first statements, and the COMMIT the block ends it with goes with the
    writes whose answers are read after it. Any other statement in the block (the ORM's) first
    sends what is queued, so everything runs in the order it was written. A block that raises,
    or a statement that fails, rolls it all back. Not `durable`: it commits without waiting for
    the WAL to reach the disk, for writes whose loss in a crash of the database server something
    else recovers (expiry, reconciliation). The connection stays in autocommit for Django, so
    nothing in the block may open an `atomic` of its own (refused, loudly), nor another pipelined
    transaction (its COMMIT would commit this one's statements)."""
    if _batch_of(connection) is not None:
        raise TransactionManagementError("A pipelined transaction cannot run inside another.")
    connection.ensure_connection()
    batch = _Batch(connection)
    token = _BATCH.set(batch)
    ended = False
    try:
        with connection.execute_wrapper(batch.before_any_other_statement):
            execute(connection, "BEGIN")
            if not durable:
                execute(connection, "SET LOCAL synchronous_commit TO OFF")
            yield
            batch.send()
        ended = True
    finally:
        _BATCH.reset(token)
        batch.abandon()  # nothing is left unsent once it ended
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


class _Bookkeeping:
    """One transaction of an exec's bookkeeping; `unread_until_commit` sends its last statements
    with the COMMIT when nothing reads their results."""

    def __init__(self, connection: BaseDatabaseWrapper | None) -> None:
        self._connection = connection  # None: not a PostgreSQL transaction of its own
        self.committed = False

    @contextmanager
    def unread_until_commit(self) -> Iterator[None]:
        """Runs the block, then commits the transaction. On PostgreSQL the block's statements and
        the COMMIT go to the server in one round trip (the pipelined transaction sends what it
        queued once, as it ends), so no statement in the block may read a result: a reader
        called, or a statement of the ORM's, would send what is queued in a round trip of its own.
        A statement sent in the block is read after the bookkeeping block (`answer_later`).
        A failure anywhere rolls everything back. It must be the last thing its bookkeeping block
        does: what would follow it would run after the COMMIT, in no transaction of the block's."""
        yield
        if self._connection is not None:
            execute(self._connection, "COMMIT")
            self.committed = True


# Set while this thread runs a bookkeeping transaction of its own: one nested in it is part of it.
_OWN_TRANSACTION: ContextVar[bool] = ContextVar("exec_bookkeeping", default=False)


@contextmanager
def bookkeeping(*, savepoint: bool = True, unread: bool = False) -> Iterator[_Bookkeeping]:
    """A transaction of bookkeeping (an exec's: the person's slot, the heartbeat, the command's
    record, the backend's id of a sandbox just opened). Run as a transaction of its own on
    PostgreSQL, it commits without waiting for the WAL to reach the disk (`synchronous_commit` off
    for it alone): it stays atomic and ordered, and what a crash of the database server could lose
    of it is what expiry and reconciliation recover anyway (a slot frees at its `expires_at`, a
    record at its `ends_by`, an older heartbeat only shortens the lease, a sandbox whose id was
    lost is one the ledger does not know). That saves a live exec two disk flushes, and an exec
    that opens a sandbox four.

    It also saves round trips, which on PostgreSQL are most of an exec's database time
    (`_own_transaction`): its statements (`execute`, `answer_later`) reach the server
    together when one of them has its answer read, or when the block ends. So a statement in it
    reads its answer by a RETURNING, read after the block where it can be, never by the row count
    of the ORM's `update()` or `delete()`, which sends what was queued first. With `unread` (no
    statement in the block reads a result, see `_Bookkeeping.unread_until_commit`) the COMMIT
    goes with them: the whole transaction in one."""
    connection = transaction.get_connection()
    if _OWN_TRANSACTION.get():
        yield _Bookkeeping(None)  # part of the bookkeeping transaction around it
    elif pipelines(connection):
        with _own_transaction(connection, unread=unread) as book:
            yield book
    else:
        with transaction.atomic(savepoint=savepoint):
            yield _Bookkeeping(None)


@contextmanager
def _own_transaction(connection: BaseDatabaseWrapper, *, unread: bool) -> Iterator[_Bookkeeping]:
    """A `pipelined_transaction` with `synchronous_commit` off (two of a live exec's
    seven round trips were BEGINs alone); a nested `bookkeeping` joins it."""
    book = _Bookkeeping(connection)
    token = _OWN_TRANSACTION.set(True)
    try:
        with pipelined_transaction(connection, durable=False):
            if unread:
                with book.unread_until_commit():
                    yield book
            else:
                yield book
                if not book.committed:
                    execute(connection, "COMMIT")
    finally:
        _OWN_TRANSACTION.reset(token)

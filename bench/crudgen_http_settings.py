"""Settings of the server bench/crudgen_http.py starts: the service's own, plus the bench model's
routes and a middleware that counts the SQL statements each request sends.

The count covers every statement Django sends through a cursor (SAVEPOINT and RELEASE included, and
SQLite's BEGIN), PostgreSQL's BEGIN (psycopg sends it before the first statement after Django turns
autocommit off), COMMIT and ROLLBACK. It leaves out the `SELECT 1` connection health check Django
runs once per request on a reused PostgreSQL connection (CONN_HEALTH_CHECKS), which every request pays.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from workspace.settings import *  # noqa: F403
from workspace.settings import MIDDLEWARE

ROOT_URLCONF = "bench.crudgen_http_urls"
MIDDLEWARE = ["bench.crudgen_http_settings.StatementCountMiddleware", *MIDDLEWARE]

_CONTROL = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b", re.IGNORECASE)
_counting = threading.local()


class StatementTally:
    def __init__(self) -> None:
        self.kinds: list[str] = []

    def note(self, sql: str) -> None:
        """One statement, named by its verb and the crudgen table it touches (if any)."""
        verb = sql.split(None, 1)[0].upper() if sql.strip() else "?"
        table = re.search(r"crudgen_(\w+)", sql)
        self.kinds.append(f"{verb} {table.group(1)}" if table else verb)

    def execute(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        self.note(sql)
        return execute(sql, params, many, context)

    @property
    def crudgen(self) -> int:
        """Statements on crudgen's tables plus transaction control (the service's own lookups run without)."""
        return sum(1 for kind in self.kinds if " " in kind or _CONTROL.match(kind))


def _counted(method: Callable[..., Any], statement: Callable[[Any, tuple[Any, ...]], str | None]) -> Callable[..., Any]:
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        tally = getattr(_counting, "tally", None)
        sql = statement(self, args) if tally is not None and self.alias == "default" else None
        if sql:
            tally.note(sql)
        return method(self, *args, **kwargs)

    return wrapper


def _begin(connection: Any, args: tuple[Any, ...]) -> str | None:
    # On SQLite Django sends BEGIN through a cursor (counted there); psycopg sends it by itself.
    turning_off = bool(args) and args[0] is False
    return "BEGIN" if turning_off and connection.vendor == "postgresql" and connection.get_autocommit() else None


class StatementCountMiddleware:
    """Outermost: answers `X-Bench-Statements` (all), `X-Bench-Crudgen-Statements` and `X-Bench-Sql`."""

    _installed = False

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response
        if not StatementCountMiddleware._installed:
            from django.db.backends.base.base import BaseDatabaseWrapper

            BaseDatabaseWrapper.set_autocommit = _counted(BaseDatabaseWrapper.set_autocommit, _begin)
            BaseDatabaseWrapper.commit = _counted(BaseDatabaseWrapper.commit, lambda c, a: "COMMIT")
            BaseDatabaseWrapper.rollback = _counted(BaseDatabaseWrapper.rollback, lambda c, a: "ROLLBACK")
            StatementCountMiddleware._installed = True

    def __call__(self, request: Any) -> Any:
        from django.db import connection

        tally = StatementTally()
        _counting.tally = tally
        try:
            with connection.execute_wrapper(tally.execute):
                response = self.get_response(request)
        finally:
            _counting.tally = None
        response["X-Bench-Statements"] = str(len(tally.kinds))
        response["X-Bench-Crudgen-Statements"] = str(tally.crudgen)
        response["X-Bench-Sql"] = ", ".join(tally.kinds)
        return response

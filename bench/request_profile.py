"""Where one request's time goes in the service: each middleware, authentication, the access
policy, the view and the database, for a get, a write, a list, a page and the 304 notification poll.

Run: .venv/bin/python bench/request_profile.py [--repeat 200] [--rows 1000] [--notifications 10000]
                                               [--database-url postgres://postgres@127.0.0.1:5432/postgres]

In this process, DEBUG off, Django accounts (production mode), on a throwaway database (a SQLite
file, or `bench_profile` beside --database-url's); the Task model of bench/crudgen_http_urls.py
with --rows tasks, --notifications notifications of the polled user. Each request goes through
Django's WSGI handler as gunicorn calls it (request_started / request_finished included, so opening
and closing the database connection is counted), a token in `Authorization: Bearer` for the API,
a session cookie for the page (the home page). Each middleware's time is its own (its time less the
time of everything inside it); "connection" is the handler's time outside every middleware (the
request signals: close_old_connections); "view" is the view less the database, authentication and
the access policy inside it; "db" is time in the driver (every statement; `n q` their count).
Medians of --repeat requests, in ms (the total is the median of whole requests, so the parts'
medians need not add up to it exactly). It asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

USER = "bench"


class Clock:
    """Time spent in named parts of one request; parts nest, each counts its own time only."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = defaultdict(float)
        self.stack: list[list[float]] = []  # [start, time of the parts inside]
        self.queries = 0
        self.total = 0.0  # seconds in the handler, this request

    def enter(self) -> None:
        self.stack.append([time.perf_counter(), 0.0])

    def leave(self, name: str) -> None:
        start, inner = self.stack.pop()
        total = time.perf_counter() - start
        self.parts[name] += total - inner
        if self.stack:
            self.stack[-1][1] += total

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.enter()
            try:
                return function(*args, **kwargs)
            finally:
                self.leave(name)

        return timed

    def db(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        self.queries += 1
        self.enter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.leave("db")


CLOCK = Clock()


def _instrument(handler: Any) -> None:
    """Wraps every middleware of `handler`'s chain, the view, authentication and the access policy."""
    import collab.authentication
    import collab.middleware
    import crudgen.access

    collab.middleware.resolve_identity = CLOCK.wrap("auth (identity, token lookup)", collab.middleware.resolve_identity)
    auth = collab.authentication.WorkspaceAuthentication
    auth.authenticate = CLOCK.wrap("auth (DRF)", auth.authenticate)
    for name in ("list_scope", "allows", "check_data"):
        for cls in (crudgen.access.AccessPolicy, crudgen.access.CreatorOnly):
            if name in cls.__dict__:
                setattr(cls, name, CLOCK.wrap("access policy", cls.__dict__[name]))
    from django.db.backends.base.base import BaseDatabaseWrapper

    BaseDatabaseWrapper.connect = CLOCK.wrap("db connect (open, PRAGMAs)", BaseDatabaseWrapper.connect)
    # The chain: each middleware instance holds the next as get_response (wrapped by Django's
    # exception converter); the innermost holds the handler's own _get_response (URL resolution,
    # process_view hooks, the view).
    chain = _chain(handler)
    chain[-1].get_response = CLOCK.wrap("view (resolve, process_view, view)", chain[-1].get_response)
    for middleware in chain:
        cls = type(middleware)
        if not getattr(cls, "_bench_wrapped", False):
            cls.__call__ = CLOCK.wrap(f"middleware {cls.__name__}", cls.__call__)
            cls._bench_wrapped = True


def _chain(handler: Any) -> list[Any]:
    """The middleware instances of `handler`, outermost first."""
    found = []
    node: Any = handler._middleware_chain
    while True:
        target = getattr(node, "__wrapped__", node)
        if getattr(target, "__self__", None) is handler or not hasattr(target, "get_response"):
            return found
        found.append(target)
        node = target.get_response


def _environ(factory: Any, method: str, path: str, *, body: Any = None, headers: dict[str, str]) -> dict[str, Any]:
    import json

    if body is None:
        request = getattr(factory, method.lower())(path, **headers)
    else:
        request = getattr(factory, method.lower())(path, json.dumps(body), content_type="application/json", **headers)
    return request.environ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--notifications", type=int, default=10_000)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""))
    args = parser.parse_args()
    os.environ.update(
        DJANGO_SETTINGS_MODULE="bench.service_task_settings",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="bench-profile-secret-key-" + "x" * 30,
        DJANGO_ALLOWED_HOSTS="testserver",
        WORKSPACE_MOCK_IDENTITY="0",
        WORKSPACE_REQUEST_LOG_LEVEL="WARNING",
    )
    from bench.common import bench_var_dir, setup_django

    os.environ["WORKSPACE_VAR_DIR"] = str(bench_var_dir("bench-profile-"))
    vendor = setup_django(args.database_url, "profile")
    from django.contrib.auth.models import User
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import connection
    from django.test import Client, RequestFactory

    from bench.notifications import fill
    from collab.actor import Actor
    from collab.tokens import token_create
    from crudgen.models import StoredResource

    User.objects.create_user(USER, password="bench-secret-1")
    token = token_create(actor=Actor(USER), name="bench").token
    api = {"HTTP_AUTHORIZATION": f"Bearer {token}", "HTTP_ACCEPT": "application/json"}
    browser = Client()
    browser.force_login(User.objects.get(username=USER))
    page = {"HTTP_COOKIE": f"sessionid={browser.cookies['sessionid'].value}", "HTTP_ACCEPT": "text/html"}
    fill_polled(fill, args.notifications)
    handler = WSGIHandler()
    factory = RequestFactory()

    def call(method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        captured: dict[str, Any] = {}

        def start_response(status: str, response_headers: list[tuple[str, str]]) -> None:
            captured["status"] = int(status.split()[0])
            captured["headers"] = dict(response_headers)

        environ = _environ(factory, method, path, body=body, headers=headers or api)
        began = time.perf_counter()
        CLOCK.enter()
        result = handler(environ, start_response)
        content = b"".join(result)
        result.close()
        CLOCK.leave("connection (request signals)")
        CLOCK.total += time.perf_counter() - began
        if captured["status"] >= 400:
            raise RuntimeError(f"{method} {path}: {captured['status']} {content[:300]!r}")
        return captured["status"], (captured["headers"], content)

    import json

    base = "/api/v1/task"
    for n in range(args.rows):
        call("POST", base, {"title": f"task {n}", "done": False, "tags": ["seed"], "priority": n % 5})
    some = StoredResource.objects.filter(namespace="task").values_list("resource_id", flat=True)[:1][0]
    etag = call("GET", "/notifications")[1][0]["ETag"]
    created: list[str] = []

    def write() -> None:
        _, (_, content) = call("POST", base, {"title": "w", "done": False, "tags": [], "priority": 1})
        created.append(json.loads(content)["resource_id"])

    kinds: dict[str, Callable[[], Any]] = {
        "get": lambda: call("GET", f"{base}/{some}/data"),
        "write (create)": write,
        "list (page of 20)": lambda: call("GET", f"{base}/data?page=1&page_size=20"),
        "page (home, session)": lambda: call("GET", "/", headers=page),
        "poll 304": lambda: call("GET", "/notifications", headers={**api, "HTTP_IF_NONE_MATCH": etag}),
    }
    for action in kinds.values():  # warm-up before instrumenting
        for _ in range(5):
            action()
    _instrument(handler)
    print(
        f"{vendor}: one request through the WSGI handler, DEBUG off, token (API) or session (page); "
        f"{args.rows:,} tasks, {args.notifications:,} notifications; median of {args.repeat}, ms"
    )
    with connection.execute_wrapper(CLOCK.db):
        for kind, action in kinds.items():
            samples: dict[str, list[float]] = defaultdict(list)
            totals, queries = [], []
            for _ in range(args.repeat):
                CLOCK.parts.clear()
                CLOCK.queries = 0
                CLOCK.total = 0.0
                action()
                totals.append(CLOCK.total * 1000)
                queries.append(CLOCK.queries)
                for name, seconds in CLOCK.parts.items():
                    samples[name].append(seconds * 1000)
            print(f"\n{kind}: total {statistics.median(totals):.3f} ms, {statistics.median(queries):g} q")
            print(f"| {'part':<48} | {'ms':>7} |")
            print(f"|{'-' * 50}|{'-' * 9}|")
            for name, values in sorted(samples.items(), key=lambda item: -statistics.median(item[1])):
                values += [0.0] * (args.repeat - len(values))
                print(f"| {name:<48} | {statistics.median(values):>7.3f} |")


def fill_polled(fill: Callable[[int, int], None], total: int) -> None:
    from django.conf import settings

    del settings
    import bench.notifications

    bench.notifications.POLLED_USER = USER
    fill(total, 0)


if __name__ == "__main__":
    main()

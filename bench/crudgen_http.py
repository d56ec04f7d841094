"""crudgen over HTTP: p50/p90 and SQL statements per request of each generated route, on gunicorn.

Run: .venv/bin/python bench/crudgen_http.py [--sizes 1000,10000] [--requests 150]
                                            [--database-url postgres://postgres@127.0.0.1:5432/ws_h16b_bench]

Starts gunicorn with workspace/gunicorn.conf.py (gthread, DEBUG off, Django accounts) and one worker
on a free loopback port, over a throwaway database: a temporary SQLite file, or the PostgreSQL
database --database-url names, dropped and created again (it must be disposable) and dropped at the
end. The model is `Task {title, done, tags, priority}`, registered as the service registers its own
(bench/crudgen_http_urls.py: Django storage, full tracking, private to its creator).

At each size the table holds that many of one user's tasks, seeded in SQL with two revisions each
(the last --requests of them deleted), and a fresh server is started. One client, logged in through
the login form, sends --requests rounds of one request per operation on one keep-alive connection
(rounds, so that a load spike on a shared machine hits every operation alike), pausing --pause-ms
between requests so that no request is timed while the server still finishes the one before (on
SQLite Django closes the connection after answering, and the close checkpoints the WAL):

    create; get (`/data` of a seeded task); list (first page of 20, `/data`);
    patch, put, delete, restore, switch (to revision 1): on the tasks the create step made, so the
        worker has seen them before, as a client that creates or reads and then writes does;
    the same five, "cold": each on seeded tasks no request has touched yet.

Prints p50 and p90 in ms (client side, wall clock), p50 over create's p50, and SQL statements per
request: all of them, and crudgen's (statements on its tables plus BEGIN, COMMIT, SAVEPOINT,
RELEASE), as counted inside the server by bench/crudgen_http_settings.py; then the statements of
one request of each operation.
It asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.live import Client, Response, gunicorn, migrate, production_env, run_django

USER = "bench"
PASSWORD = "bench-secret-1"
BASE = "/api/v1/task"

SEED = """
import json, sys, uuid
from datetime import UTC, datetime, timedelta
from django.contrib.auth.models import User
from crudgen import DjangoStorage
from crudgen.models import StoredResource, StoredRevision
user, password, size, deleted = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if not User.objects.filter(username=user).exists():
    User.objects.create_user(user, password=password)
StoredResource.objects.filter(namespace="task").delete()
start = datetime(2026, 1, 1, tzinfo=UTC)
ids = [str(uuid.uuid4()) for _ in range(size)]
def task(n, title):
    return {"title": title, "done": False, "tags": ["seed"], "priority": n % 5}
StoredResource.objects.bulk_create(
    [
        StoredResource(
            namespace="task", resource_id=rid, current_revision_id=f"{rid}:2", is_deleted=n >= size - deleted,
            created_time=start + timedelta(seconds=n), updated_time=start + timedelta(seconds=n),
            created_by=user, updated_by=user, revision_count=2, data=task(n, f"task {n}"),
        )
        for n, rid in enumerate(ids)
    ],
    batch_size=2000,
)
pks = dict(StoredResource.objects.filter(namespace="task").values_list("resource_id", "pk"))
StoredRevision.objects.bulk_create(
    [
        StoredRevision(
            resource_id=pks[rid], revision_id=f"{rid}:{number}", parent_revision_id=f"{rid}:1" if number == 2 else None,
            number=number, data=task(n, f"task {n}" if number == 2 else f"task {n} draft"),
            created_time=start + timedelta(seconds=n), created_by=user,
        )
        for n, rid in enumerate(ids)
        for number in (1, 2)
    ],
    batch_size=2000,
)
DjangoStorage(namespace="task").recount()
print(json.dumps({"live": ids[: size - deleted], "deleted": ids[size - deleted :]}))
"""

WRITES = ("patch", "put", "delete", "restore", "switch")


@dataclass
class Timing:
    operation: str
    milliseconds: list[float]
    statements: list[int]
    crudgen_statements: list[int]
    sample_sql: str

    @staticmethod
    def percentile(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _body(n: int) -> dict[str, Any]:
    return {"title": f"bench {n}", "done": n % 2 == 0, "tags": ["bench", f"t{n % 7}"], "priority": n % 5}


def _request(operation: str, resource_id: str, n: int) -> tuple[str, str, Any]:
    """Method, path and body of one request of a write `operation` on `resource_id`."""
    if operation == "patch":
        return "PATCH", f"{BASE}/{resource_id}", [{"op": "replace", "path": "/title", "value": f"patched {n}"}]
    if operation == "put":
        return "PUT", f"{BASE}/{resource_id}", _body(n + 1)
    if operation == "delete":
        return "DELETE", f"{BASE}/{resource_id}", None
    if operation == "restore":
        return "POST", f"{BASE}/{resource_id}/restore", None
    return "POST", f"{BASE}/{resource_id}/switch/{resource_id}:1", None


@dataclass
class Driver:
    """One logged-in keep-alive client that times requests, idle `pause` seconds before each."""

    client: Client
    pause: float

    def timed(self, timing: Timing, calls: list[tuple[str, str, Any]], answers: list[Any] | None = None) -> None:
        """Sends `calls` one after the other into `timing`; `answers` (if given) collects their JSON bodies."""
        for method, path, body in calls:
            time.sleep(self.pause)
            began = time.perf_counter()
            response: Response = self.client.request(method, path, body)
            elapsed = time.perf_counter() - began
            if response.status >= 400:
                raise RuntimeError(f"{timing.operation} {path}: {response.status} {response.body[:300]!r}")
            timing.milliseconds.append(elapsed * 1000)
            timing.statements.append(int(response.headers.get("x-bench-statements", "-1")))
            timing.crudgen_statements.append(int(response.headers.get("x-bench-crudgen-statements", "-1")))
            timing.sample_sql = response.headers.get("x-bench-sql", "")
            if answers is not None:
                answers.append(response.json())

    def warm_up(self) -> None:
        """A few of each request first, so URL resolution and imports are not timed."""
        ignored = Timing("warm-up", [], [], [], "")
        answers: list[Any] = []
        self.timed(ignored, [("POST", BASE, _body(n)) for n in range(3)], answers)
        ids = [answer["resource_id"] for answer in answers]
        self.timed(ignored, [("GET", f"{BASE}/{ids[0]}/data", None), ("GET", f"{BASE}/data", None)])
        for operation in WRITES:
            self.timed(ignored, [_request(operation, rid, n) for n, rid in enumerate(ids)])


def _run_size(env: dict[str, str], size: int, requests: int, pause: float, log: Path) -> list[Timing]:
    seeded = json.loads(run_django(SEED, env, USER, PASSWORD, str(size), str(requests)).splitlines()[-1])
    live: list[str] = seeded["live"]
    if len(live) < 5 * requests:
        raise SystemExit(f"size {size} is too small for {requests} requests per operation (needs {6 * requests})")
    # Disjoint seeded tasks for the reads and each cold write, so a cold write meets a task untouched.
    cold = {op: live[i * requests : (i + 1) * requests] for i, op in enumerate(("get", "patch", "put", "delete"))}
    cold["switch"] = live[4 * requests : 5 * requests]
    cold["restore"] = seeded["deleted"]
    names = ["create", "get", "list", *WRITES, *(f"{op}, cold" for op in WRITES)]
    timings = {name: Timing(name, [], [], [], "") for name in names}
    with gunicorn(env, log, workers=1) as server:
        driver = Driver(server.client(), pause)
        driver.client.login(USER, PASSWORD)
        driver.warm_up()
        # Rounds of one request of each operation, so a load spike of the machine hits them alike.
        for n in range(requests):
            answers: list[Any] = []
            driver.timed(timings["create"], [("POST", BASE, _body(n))], answers)
            mine = answers[0]["resource_id"]
            driver.timed(timings["get"], [("GET", f"{BASE}/{cold['get'][n]}/data", None)])
            driver.timed(timings["list"], [("GET", f"{BASE}/data?page=1&page_size=20", None)])
            for operation in WRITES:
                driver.timed(timings[operation], [_request(operation, mine, n)])
            for operation in WRITES:
                driver.timed(timings[f"{operation}, cold"], [_request(operation, cold[operation][n], n)])
        driver.client.close()
    return list(timings.values())


@contextmanager
def _database(database_url: str) -> Any:
    """A fresh SQLite file, or the named PostgreSQL database dropped and created again (dropped after)."""
    if not database_url:
        yield f"sqlite:///{tempfile.mkdtemp(prefix='bench-crudgen-http-')}/bench.sqlite3"
        return
    import psycopg

    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _print(vendor: str, size: int, timings: list[Timing]) -> None:
    print(f"\n{vendor}, {size:,} rows")
    print(
        f"| {'operation':<16} | {'size':>7} | {'p50 ms':>7} | {'p90 ms':>7} | {'/create':>7} "
        f"| {'statements':>10} | {'crudgen':>7} |"
    )
    print(f"|{'-' * 18}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 12}|{'-' * 9}|")
    create = statistics.median(timings[0].milliseconds)
    for t in timings:
        p50, p90 = statistics.median(t.milliseconds), Timing.percentile(t.milliseconds, 0.9)
        statements, crudgen = statistics.median(t.statements), statistics.median(t.crudgen_statements)
        print(
            f"| {t.operation:<16} | {size:>7,} | {p50:>7.2f} | {p90:>7.2f} | {p50 / create:>7.2f} "
            f"| {statements:>10g} | {crudgen:>7g} |"
        )
    print("\nstatements of the last request of each operation:")
    for t in timings:
        print(f"  {t.operation:<16} {t.sample_sql}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--requests", type=int, default=150, help="requests per operation and size")
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""))
    parser.add_argument("--pause-ms", type=float, default=20, help="idle time before each request")
    args = parser.parse_args()
    var_dir = Path(tempfile.mkdtemp(prefix="bench-crudgen-http-var-"))
    with _database(args.database_url) as url:
        env = production_env(
            url,
            var_dir,
            DJANGO_SETTINGS_MODULE="bench.crudgen_http_settings",
            WORKSPACE_SERVE_PREPARE="0",
            WORKSPACE_SERVE_WORKER="0",
        )
        migrate(env)
        vendor = "PostgreSQL" if url.startswith("postgres") else "SQLite"
        print(
            f"{vendor}: gunicorn, 1 worker, keep-alive client, {args.requests} requests per operation, "
            f"{args.pause_ms:g} ms apart; {os.cpu_count()} cores, loopback"
        )
        for size in [int(s) for s in args.sizes.split(",") if s]:
            log = var_dir / f"gunicorn-{size}.log"
            _print(vendor, size, _run_size(env, size, args.requests, args.pause_ms / 1000, log))


if __name__ == "__main__":
    main()

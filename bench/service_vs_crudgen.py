"""The service's request path against crudgen alone: p50 per operation, side by side, in one run.

Run: .venv/bin/python bench/service_vs_crudgen.py [--sizes 1000,10000] [--requests 100]
                                                  [--database-url postgres://postgres@127.0.0.1:5432/postgres]

Starts two servers at each size, each gunicorn with one worker, DEBUG off, on a loopback port, each
over its own throwaway database (two SQLite files, or two PostgreSQL databases made beside
--database-url's and dropped after); crudgen alone on gthread with one thread (WSGI, its plainest
way; a sync worker would close the client's keep-alive connection after every answer), the service
on the stack its app processes run (a uvicorn worker over workspace/serving.py's ASGI handler):

    crudgen alone: bench/crudgen_alone_settings.py, a bare Django project (no middleware, no
        authentication) registering the Task model {title, done, tags, priority};
    the service: workspace.settings (production mode, Django accounts) with the same model as the
        service registers its own (bench/crudgen_http_urls.py: full tracking, private to its
        creator), the client sending a personal API token (`Authorization: Bearer`).

Each table holds that many tasks (seeded in SQL). One keep-alive client per server; rounds of one
request per operation alternate between the two servers, so a load spike of the shared machine
hits both alike: create, get (a seeded task), list (first page of 20), patch, put (the created
task), delete (it). --pause-ms idles before each request. Prints p50 (client side, wall clock) of
each and the ratio service / crudgen alone. It asserts nothing about time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.live import REPO, Client, free_port, migrate, production_env, run_django, stop, wait_for

USER = "bench"
BASE = "/api/v1/task"
OPERATIONS = ("create", "get", "list", "patch", "put", "delete")

SEED = """
import json, sys, uuid
from datetime import UTC, datetime, timedelta
from crudgen import DjangoStorage
from crudgen.models import StoredResource, StoredRevision
user, size, service = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
token = ""
if service:
    from django.contrib.auth.models import User
    from collab.actor import Actor
    from collab.tokens import token_create
    User.objects.get_or_create(username=user)
    token = token_create(actor=Actor(user), name="bench").token
owner = user if service else None
StoredResource.objects.filter(namespace="task").delete()
start = datetime(2026, 1, 1, tzinfo=UTC)
ids = [str(uuid.uuid4()) for _ in range(size)]
def task(n):
    return {"title": f"task {n}", "done": False, "tags": ["seed"], "priority": n % 5}
StoredResource.objects.bulk_create(
    [
        StoredResource(
            namespace="task", resource_id=rid, current_revision_id=f"{rid}:1",
            created_time=start + timedelta(seconds=n), updated_time=start + timedelta(seconds=n),
            created_by=owner, updated_by=owner, revision_count=1, data=task(n),
        )
        for n, rid in enumerate(ids)
    ],
    batch_size=2000,
)
pks = dict(StoredResource.objects.filter(namespace="task").values_list("resource_id", "pk"))
StoredRevision.objects.bulk_create(
    [
        StoredRevision(resource_id=pks[rid], revision_id=f"{rid}:1", number=1, data=task(n),
                       created_time=start + timedelta(seconds=n), created_by=owner)
        for n, rid in enumerate(ids)
    ],
    batch_size=2000,
)
DjangoStorage(namespace="task").recount()
print(json.dumps({"ids": ids, "token": token}))
"""


@contextlib.contextmanager
def _databases(server_url: str) -> Iterator[tuple[str, str]]:
    """Two fresh databases: SQLite files, or PostgreSQL databases beside `server_url`'s."""
    if not server_url:
        folder = tempfile.mkdtemp(prefix="bench-service-vs-crudgen-")
        yield f"sqlite:///{folder}/alone.sqlite3", f"sqlite:///{folder}/service.sqlite3"
        return
    import psycopg

    parts = urlsplit(server_url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    names = [f"bench_svc_{kind}_{uuid.uuid4().hex[:6]}" for kind in ("alone", "service")]
    with psycopg.connect(admin, autocommit=True) as connection:
        for name in names:
            connection.execute(f'CREATE DATABASE "{name}"')
    try:
        alone, service = (urlunsplit(parts._replace(path=f"/{name}")) for name in names)
        yield alone, service
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            for name in names:
                connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# crudgen alone on gthread, one worker of one thread (WSGI: the library's plainest way); the
# service as every app process of it runs (workspace/gunicorn.conf.py's uvicorn worker over
# workspace/serving.py), one worker, its keep-alive held open as long.
_WSGI = ["--worker-class", "gthread", "--threads", "1", "--keep-alive", "60", "django.core.wsgi:get_wsgi_application()"]
_ASGI = ["--worker-class", "workspace.uvicorn_worker.WorkspaceUvicornWorker", "workspace.asgi:application"]


@contextlib.contextmanager
def _server(env: dict[str, str], log: Path, *, stack: list[str]) -> Iterator[int]:
    """gunicorn, one worker, keep-alive, on a free loopback port, serving `stack` (_WSGI or _ASGI)."""
    import subprocess

    port = free_port()
    command = [
        sys.executable, "-m", "gunicorn", "--workers", "1", "--bind", f"127.0.0.1:{port}", *stack,
    ]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:

        def up() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"gunicorn exited:\n{log.read_text(errors='replace')}")
            with contextlib.suppress(OSError):
                Client(port).get(f"{BASE}/data")
                return True
            return False

        wait_for(up, "gunicorn to answer", seconds=60, poll=0.1)
        yield port
    finally:
        stop(process)


def _body(n: int) -> dict[str, Any]:
    return {"title": f"bench {n}", "done": n % 2 == 0, "tags": ["bench", f"t{n % 7}"], "priority": n % 5}


class Side:
    """One server's client and its timings."""

    def __init__(self, name: str, port: int, ids: list[str], token: str, pause: float) -> None:
        self.name = name
        self.client = Client(port)
        if token:
            self.client.default_headers["Authorization"] = f"Bearer {token}"
        self.ids = ids
        self.pause = pause
        self.timings: dict[str, list[float]] = {op: [] for op in OPERATIONS}

    def _timed(self, operation: str | None, method: str, path: str, body: Any = None) -> Any:
        time.sleep(self.pause)
        began = time.perf_counter()
        response = self.client.request(method, path, body)
        elapsed = (time.perf_counter() - began) * 1000
        if response.status >= 400:
            raise RuntimeError(f"{self.name} {method} {path}: {response.status} {response.body[:300]!r}")
        if operation:
            self.timings[operation].append(elapsed)
        return response.json() if response.body else None

    def round(self, n: int, timed: bool = True) -> None:
        def op(name: str) -> str | None:
            return name if timed else None

        created = self._timed(op("create"), "POST", BASE, _body(n))["resource_id"]
        self._timed(op("get"), "GET", f"{BASE}/{self.ids[n % len(self.ids)]}/data")
        self._timed(op("list"), "GET", f"{BASE}/data?page=1&page_size=20")
        patch = [{"op": "replace", "path": "/title", "value": f"patched {n}"}]
        self._timed(op("patch"), "PATCH", f"{BASE}/{created}", patch)
        self._timed(op("put"), "PUT", f"{BASE}/{created}", _body(n + 1))
        self._timed(op("delete"), "DELETE", f"{BASE}/{created}")


def _seed(env: dict[str, str], size: int, service: bool) -> tuple[list[str], str]:
    seeded = json.loads(run_django(SEED, env, USER, str(size), "1" if service else "0").splitlines()[-1])
    return seeded["ids"], seeded["token"]


def run(server_url: str, sizes: list[int], requests: int, pause: float) -> dict[int, dict[str, dict[str, float]]]:
    """{size: {operation: {"alone": p50, "service": p50}}}"""
    var_dir = Path(tempfile.mkdtemp(prefix="bench-service-vs-crudgen-var-"))
    results: dict[int, dict[str, dict[str, float]]] = {}
    with _databases(server_url) as (alone_url, service_url):
        alone_env = production_env(alone_url, var_dir, DJANGO_SETTINGS_MODULE="bench.crudgen_alone_settings")
        service_env = production_env(service_url, var_dir, DJANGO_SETTINGS_MODULE="bench.service_task_settings")
        migrate(alone_env)
        migrate(service_env)
        for size in sizes:
            alone_ids, _ = _seed(alone_env, size, service=False)
            service_ids, token = _seed(service_env, size, service=True)
            with (
                _server(alone_env, var_dir / f"alone-{size}.log", stack=_WSGI) as alone_port,
                _server(
                    {**service_env, "WORKSPACE_IDLE_TIMEOUT_SECONDS": "60"},
                    var_dir / f"service-{size}.log",
                    stack=_ASGI,
                ) as service_port,
            ):
                sides = [
                    Side("crudgen alone", alone_port, alone_ids, "", pause),
                    Side("the service", service_port, service_ids, token, pause),
                ]
                for n in range(5):  # warm-up: imports, URL resolution, first connections
                    for side in sides:
                        side.round(n, timed=False)
                for n in range(requests):
                    for side in sides if n % 2 == 0 else reversed(sides):
                        side.round(n)
            results[size] = {
                op: {
                    "alone": statistics.median(sides[0].timings[op]),
                    "service": statistics.median(sides[1].timings[op]),
                }
                for op in OPERATIONS
            }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--requests", type=int, default=100, help="rounds per size")
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""))
    parser.add_argument("--pause-ms", type=float, default=5, help="idle time before each request")
    args = parser.parse_args()
    vendor = "PostgreSQL" if args.database_url.startswith("postgres") else "SQLite"
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print(
        f"{vendor}: gunicorn, 1 worker each (crudgen alone gthread x 1 thread, the service uvicorn), "
        f"one keep-alive client each, {args.requests} rounds, "
        f"{args.pause_ms:g} ms apart; {os.cpu_count()} cores, loopback"
    )
    results = run(args.database_url, sizes, args.requests, args.pause_ms / 1000)
    print(f"| {'operation':<10} | {'size':>7} | {'alone p50 ms':>12} | {'service p50 ms':>14} | {'ratio':>5} |")
    print(f"|{'-' * 12}|{'-' * 9}|{'-' * 14}|{'-' * 16}|{'-' * 7}|")
    for size, figures in results.items():
        for op, pair in figures.items():
            ratio = pair["service"] / pair["alone"]
            print(f"| {op:<10} | {size:>7,} | {pair['alone']:>12.2f} | {pair['service']:>14.2f} | {ratio:>5.2f} |")


if __name__ == "__main__":
    main()

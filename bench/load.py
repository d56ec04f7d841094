"""Bounded load test: a fixed number of requests from this process against gunicorn on PostgreSQL.

Run: .venv/bin/python bench/load.py [--requests 3000] [--clients 8] [--workers 4] [--database-url postgres://...]

Starts gunicorn with workspace/gunicorn.conf.py (DEBUG off, Django accounts) over a throwaway
database on the PostgreSQL server named by --database-url, seeds users, notifications, a knowledge
collection and one notebook item per client, then runs --requests requests spread over --clients
threads (each logged in through the login form, one keep-alive connection each), in a fixed mix:
notification polls (half of them conditional), generated-route reads and writes on
/api/v1/workflow (create, JSON Patch), exec of `true` on the item's live sandbox (local backend),
and KB document lists. Prints throughput and p50/p99 per kind, then checks that nothing was lost:
every created workflow is readable with its last value, every revision is listed, and the live
sandbox ledger equals the sandboxes the backend holds (ids, and cpu/memory sums per owner).
Everything stays on loopback; it asserts nothing about time and exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import bench_var_dir
from bench.live import (
    DEFAULT_SERVER_URL,
    Client,
    close_sandboxes,
    gunicorn,
    migrate,
    production_env,
    run_django,
    throwaway_database,
)

PASSWORD = "load-secret-1"
# (kind, weight): the mix each client cycles through, in a fixed interleaved order.
MIX = [
    ("notification poll", 8),
    ("workflow read", 4),
    ("workflow patch", 2),
    ("workflow create", 1),
    ("exec (live sandbox)", 2),
    ("kb document list", 3),
]

SEED = """
import json, sys
from django.contrib.auth.models import User
from collab.services import notify
from django.db import transaction
from knowledge import services as kb
from collab.actor import Actor
from workspace.items import services
from workspace.items.access import app_or_404
users, clients, password = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
for user in users:
    User.objects.create_user(user, password=password)
with transaction.atomic():
    for n in range(60):
        notify(users, "system", f"Seeded notice {n}", link="/my-resources", actor=users[0])
collection = kb.collection_create(actor=Actor(users[0]), name="Load handbook")
for n in range(40):
    kb.document_upload(collection_id=collection.id, actor=Actor(users[0]), filename=f"doc{n}.txt",
                       content_type="text/plain", data=("quota sandbox notice " * 40).encode())
app = app_or_404("notebook")
items = [services.item_create(app=app, title=f"load {n}", actor=Actor(user)).pk
         for n, user in ((n, users[n % len(users)]) for n in range(clients))]
print(json.dumps({"collection": collection.id, "items": items}))
"""

LEDGER = """
import json
from collections import defaultdict
from django.utils import timezone
from quotas.models import SandboxActivity
from workspace.sandboxes.registry import backend_named
backend = backend_named("local")
held = {}
for sandbox_id in backend.sandboxes():
    state = backend.state(sandbox_id)
    held[sandbox_id] = state
live = SandboxActivity.objects.filter(is_deleted=False, lease_expires_at__gt=timezone.now())
ledger = defaultdict(lambda: [0, 0.0, 0])
ids = set()
for row in live:
    ids.add(row.backend_sandbox_id)
    ledger[row.owner][0] += 1
    ledger[row.owner][1] += row.cpu_cores or 0
    ledger[row.owner][2] += row.memory_bytes or 0
print(json.dumps({"ledger_ids": sorted(ids), "held_ids": sorted(held),
                  "ledger": ledger, "held_specs": {k: v["spec"] for k, v in held.items()},
                  "held_items": {k: v["item_id"] for k, v in held.items()}}))
"""


@dataclass
class ClientState:
    user: str
    item_id: int
    workflows: dict[str, dict] = field(default_factory=dict)  # id -> last data written
    revisions: dict[str, int] = field(default_factory=dict)  # id -> revisions written
    etag: str | None = None


@dataclass
class Sample:
    kind: str
    seconds: float
    status: int


def _schedule(total: int) -> list[str]:
    order = [kind for kind, weight in MIX for _ in range(weight)]
    # Interleave: spread each kind over the cycle rather than in runs.
    order = sorted(order, key=lambda k: order.index(k) % 3)
    return [order[n % len(order)] for n in range(total)]


def _one(client: Client, state: ClientState, kind: str, n: int, collection: str) -> int:
    if kind == "notification poll":
        headers = {"If-None-Match": state.etag} if state.etag and n % 2 else {}
        response = client.get("/notifications?limit=20", headers=headers)
        state.etag = response.headers.get("etag", state.etag)
        return response.status
    if kind == "kb document list":
        return client.get(f"/kb/collections/{collection}/documents").status
    if kind == "exec (live sandbox)":
        return client.request("POST", f"/a/notebook/items/{state.item_id}/exec", {"command": ["true"]}).status
    if kind == "workflow create" or not state.workflows:
        data = {"name": f"{state.user}-{n}", "steps": ["true"], "description": ""}
        response = client.request("POST", "/api/v1/workflow", data)
        if response.status == 201:
            resource = response.json()["resource_id"]
            state.workflows[resource] = data
            state.revisions[resource] = 1
        return response.status
    resource = list(state.workflows)[n % len(state.workflows)]
    if kind == "workflow read":
        response = client.get(f"/api/v1/workflow/{resource}/data")
        return response.status
    value = f"rev-{n}"
    response = client.request(
        "PATCH", f"/api/v1/workflow/{resource}", [{"op": "replace", "path": "/description", "value": value}]
    )
    if response.status == 200:
        state.workflows[resource] = {**state.workflows[resource], "description": value}
        state.revisions[resource] += 1
    return response.status


def _run_client(port: int, state: ClientState, kinds: list[str], collection: str, out: list[Sample]) -> None:
    client = Client(port)
    client.login(state.user, PASSWORD)
    # One warm-up exec opens the item's sandbox, so every timed exec runs on a live one.
    client.request("POST", f"/a/notebook/items/{state.item_id}/exec", {"command": ["true"]})
    for n, kind in enumerate(kinds):
        began = time.perf_counter()
        status = _one(client, state, kind, n, collection)
        out.append(Sample(kind, time.perf_counter() - began, status))
    client.close()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _check(port: int, states: list[ClientState], env: dict[str, str]) -> list[str]:
    """Everything written is there: data, revisions, and the sandbox ledger against the backend."""
    problems: list[str] = []
    for state in states:
        client = Client(port)
        client.login(state.user, PASSWORD)
        for resource, data in state.workflows.items():
            read = client.get(f"/api/v1/workflow/{resource}/data")
            if read.status != 200 or {k: read.json().get(k) for k in data} != data:
                problems.append(f"workflow {resource}: {read.status} {read.body[:200]!r}")
            revisions = client.get(f"/api/v1/workflow/{resource}/revision-list?page_size=1000")
            total = revisions.json().get("total") if revisions.status == 200 else None
            if total != state.revisions[resource]:
                problems.append(f"workflow {resource}: {total} revisions listed, {state.revisions[resource]} written")
        client.close()
    found = json.loads(run_django(LEDGER, env).strip().splitlines()[-1])
    if found["ledger_ids"] != found["held_ids"]:
        problems.append(f"ledger sandboxes {found['ledger_ids']} != backend sandboxes {found['held_ids']}")
    owner_of_item = {str(s.item_id): s.user for s in states}
    held: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0])
    for sandbox_id, spec in found["held_specs"].items():
        owner = owner_of_item.get(found["held_items"][sandbox_id], "?")
        held[owner][0] += 1
        held[owner][1] += spec.get("cpu_cores") or 0
        held[owner][2] += spec.get("memory_bytes") or 0
    if {k: list(v) for k, v in held.items()} != found["ledger"]:
        problems.append(f"ledger sums {found['ledger']} != live sandboxes {dict(held)}")
    if len(found["held_ids"]) != len(states):
        problems.append(f"{len(found['held_ids'])} live sandboxes for {len(states)} items")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="requests in total, over all clients")
    parser.add_argument("--clients", type=int, default=8, help="client threads (one connection each)")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL") or DEFAULT_SERVER_URL)
    parser.add_argument("--json-out", default="", help="also write the figures as JSON to this file")
    args = parser.parse_args()
    users = [f"load{n}" for n in range(args.users)]
    var_dir = bench_var_dir("bench-load-") / "var"
    with throwaway_database(args.database_url, prefix="bench_load") as url:
        env = production_env(url, var_dir, WORKSPACE_SERVE_PREPARE="0", WORKSPACE_SERVE_WORKER="0")
        migrate(env)
        seeded = json.loads(run_django(SEED, env, json.dumps(users), str(args.clients), PASSWORD).splitlines()[-1])
        states = [ClientState(users[n % len(users)], item) for n, item in enumerate(seeded["items"])]
        per_client = args.requests // args.clients
        kinds = _schedule(per_client)
        samples: list[list[Sample]] = [[] for _ in states]
        try:
            with gunicorn(env, var_dir.parent / "gunicorn.log", workers=args.workers) as server:
                threads = [
                    threading.Thread(target=_run_client, args=(server.port, s, kinds, seeded["collection"], out))
                    for s, out in zip(states, samples, strict=True)
                ]
                began = time.perf_counter()
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                wall = time.perf_counter() - began
                problems = _check(server.port, states, env)
        finally:
            close_sandboxes(env)
    everything = [s for out in samples for s in out]
    failed = [s for s in everything if s.status not in (200, 201, 304)]
    print(
        f"load on PostgreSQL: {len(everything)} requests, {args.clients} clients, {args.workers} uvicorn workers "
        f"x {os.environ.get('WORKSPACE_REQUEST_THREADS', '8')} request threads, {os.cpu_count()} cores, loopback"
    )
    print(f"| {'kind':<22} | {'requests':>8} | {'p50 ms':>7} | {'p99 ms':>7} | {'errors':>6} |")
    print(f"|{'-' * 24}|{'-' * 10}|{'-' * 9}|{'-' * 9}|{'-' * 8}|")
    figures = {}
    for kind, _ in MIX:
        times = [s.seconds * 1000 for s in everything if s.kind == kind]
        if not times:
            continue
        errors = sum(1 for s in failed if s.kind == kind)
        p50, p99 = statistics.median(times), _percentile(times, 0.99)
        figures[kind] = {"requests": len(times), "p50_ms": p50, "p99_ms": p99, "errors": errors}
        print(f"| {kind:<22} | {len(times):>8} | {p50:>7.1f} | {p99:>7.1f} | {errors:>6} |")
    all_times = [s.seconds * 1000 for s in everything]
    print(
        f"| {'all':<22} | {len(everything):>8} | {statistics.median(all_times):>7.1f} | "
        f"{_percentile(all_times, 0.99):>7.1f} | {len(failed):>6} |"
    )
    print(f"throughput: {len(everything) / wall:.0f} requests/s over {wall:.1f} s")
    written = sum(len(s.workflows) for s in states)
    revisions = sum(sum(s.revisions.values()) for s in states)
    print(f"checked: {written} workflows readable, {revisions} revisions listed, sandbox ledger = backend")
    for problem in problems:
        print(f"LOST: {problem}")
    if failed:
        print("failed statuses:", sorted({(s.kind, s.status) for s in failed}))
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps({"throughput": len(everything) / wall, "wall_s": wall, "kinds": figures, "problems": problems})
        )
    sys.exit(1 if problems or failed else 0)


if __name__ == "__main__":
    main()

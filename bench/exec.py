"""Benchmark exec: the round trip on a live sandbox versus one that must open a sandbox first,
against running the same command under bubblewrap directly.

"live sandbox" starts the command through the sandbox's exec agent; "live, nsenter" is the same
with the agent off (each exec enters the namespaces with nsenter and setpriv, as before it).

Run: .venv/bin/python bench/exec.py [--runs 30] [--backend local|http]
Uses a throwaway SQLite database and temp directories; `http` starts a sandbox host on a free
loopback port in this process. Prints milliseconds per exec (median, p90) and queries per exec.
Also prints the minimum (the least disturbed run on a shared machine), the database's share of
each exec, and `true` run under bubblewrap directly with the same mounts (the floor issue 28
compares a live exec with), its runs alternating with the live exec's. It asserts nothing about time.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import StepTimer, bench_var_dir, production_mode, setup_django


def _start_host(var_dir: Path) -> str:
    from quotas.values import SandboxSize
    from workspace.sandboxes.host import HostSettings, build_server

    chosen = HostSettings(SandboxSize(), var_dir / "workspaces", var_dir / "host-state")
    server = build_server("127.0.0.1", 0, chosen)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def _bwrap_directly(var_dir: Path) -> Callable[[], float] | None:
    """One run of `true` in fresh bubblewrap namespaces with the sandbox's mounts, no server in
    between: the floor a live exec is compared with (issue 28: within 1.5x of it). None when
    the boundary is off."""

    from workspace.sandboxes.boundary import configured_boundary

    boundary = configured_boundary()
    if not boundary.enabled:
        return None
    workspace = var_dir / "bwrap-direct"
    workspace.mkdir()
    argv = boundary.oneshot_argv(workspace=workspace, env={"PATH": "/usr/bin:/bin"}, argv=["true"])

    def once() -> float:
        began = time.perf_counter()
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, capture_output=True)
        return (time.perf_counter() - began) * 1000

    return once


def _alternating(first: Callable[[], float], second: Callable[[], float], runs: int) -> tuple[list[float], list[float]]:
    """`runs` samples of each, taken in turn, so that a shared machine's slow spells weigh on both
    alike (taken one after the other, the ratio moved 1.0-1.6x between identical runs)."""
    firsts, seconds = [], []
    for _ in range(runs):
        firsts.append(first())
        seconds.append(second())
    return firsts, seconds


class _OpenPhases(StepTimer):
    """Times the steps of opening a sandbox while it is entered (each call's wall time)."""

    def __init__(self) -> None:
        from workspace.items import lifecycle
        from workspace.sandboxes import local

        super().__init__(
            [
                (lifecycle, "_opening", "opening, all of it (the rest is the exec)"),
                (lifecycle, "before_sandbox_open", "  admission (quota check, the ledger's row)"),
                (local.LocalBackend, "open", "  the backend's open"),
                (local.LocalBackend, "_start_init", "    bubblewrap init started until ready"),
                (lifecycle.ledger, "activity_attach", "the ledger learns its id (in the exec's first write)"),
            ]
        )

    def medians(self) -> list[tuple[str, float]]:
        return [(label, statistics.median(spent)) for label, spent in self.spent.items() if spent]


# Runs apart from the timed ones whose queries are counted.
_COUNTED_RUNS = 5
# Live execs run before the timed ones, while the sandbox opened for them settles.
_SETTLING_RUNS = 10


def _db_ms(queries) -> float:
    """Milliseconds spent in the database (statements and commits as the driver timed them)."""
    return sum(float(query["time"]) for query in queries.captured_queries) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--backend", choices=["local", "http"], default="local")
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""))
    args = parser.parse_args()
    var_dir = bench_var_dir("bench-exec-")
    os.environ["WORKSPACE_VAR_DIR"] = str(var_dir)
    os.environ.setdefault("WORKSPACE_REQUEST_LOG_LEVEL", "WARNING")
    production_mode("exec")
    vendor = setup_django(args.database_url, "exec")

    from django.conf import settings
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from collab.actor import Actor
    from workspace.items import services
    from workspace.items.access import app_or_404
    from workspace.items.config import forget_loaded_config
    from workspace.sandboxes.isolation import configured_driver

    if args.backend == "http":
        config = var_dir / "bench.toml"
        config.write_text(f'[sandbox]\nbackend = "http"\nhost_url = "{_start_host(var_dir)}"\n')
        settings.WORKSPACE_CONFIG = str(config)
        forget_loaded_config()

    item = services.item_create(app=app_or_404("notebook"), title="bench", actor=Actor("alice"))
    client = APIClient()
    client.credentials(HTTP_X_USER_ID="alice")
    base = f"/a/notebook/items/{item.pk}"

    def exec_once() -> float:
        began = time.perf_counter()
        response = client.post(f"{base}/exec", {"command": ["true"]}, format="json")
        assert response.status_code == 200, response.content
        return (time.perf_counter() - began) * 1000

    def counted(run_once: Callable[[], object]) -> tuple[float, float]:
        """Queries and database milliseconds per run, from runs of their own: Django's query
        capture wraps every cursor in its debug wrapper, which would slow the timed runs."""
        with CaptureQueriesContext(connection) as queries:
            for _ in range(_COUNTED_RUNS):
                run_once()
        return len(queries) / _COUNTED_RUNS, _db_ms(queries) / _COUNTED_RUNS

    def close_and_exec() -> float:
        # The close between runs is not part of the figure, but its queries are; count them apart.
        services.item_sandbox_close(item=item, actor=Actor("alice"))
        return exec_once()

    rows = []
    if args.backend == "local":
        # The same live exec entering the namespaces per command (`nsenter`, `setpriv`), as before
        # the exec agent: its own sandbox, closed before the agent's figures are taken.
        settings.WORKSPACE_SANDBOX_EXEC_AGENT = False
        client.post(f"{base}/exec", {"command": ["true"]}, format="json")
        entering = [exec_once() for _ in range(args.runs)]
        rows.append(("live, nsenter", entering, *counted(exec_once)))
        services.item_sandbox_close(item=item, actor=Actor("alice"))
        settings.WORKSPACE_SANDBOX_EXEC_AGENT = True
    client.post(f"{base}/exec", {"command": ["true"]}, format="json")
    bwrap_once = _bwrap_directly(var_dir) if args.backend == "local" else None
    # The first runs after an open share the machine with the warm pool's refill; not timed.
    for _ in range(_SETTLING_RUNS):
        exec_once()
    if bwrap_once:
        live, direct = _alternating(exec_once, bwrap_once, args.runs)
    else:
        live, direct = [exec_once() for _ in range(args.runs)], []
    rows.insert(0, ("live sandbox", live, *counted(exec_once)))
    phases = _OpenPhases() if args.backend == "local" else None
    with phases or contextlib.nullcontext():
        opening = [close_and_exec() for _ in range(args.runs)]
    rows.append(("opens one", opening, *counted(close_and_exec)))
    services.item_sandbox_close(item=item, actor=Actor("alice"))
    if direct:
        rows.append(("bwrap directly", direct, 0.0, 0.0))

    driver = configured_driver().name if args.backend == "local" else "sandbox host"
    print(f"exec round trip on {vendor}, backend {args.backend} ({driver}), {args.runs} runs, command `true`")
    print(f"{'case':<15} {'median ms':>10} {'p90 ms':>8} {'min ms':>8} {'queries/exec':>13} {'db ms/exec':>11}")
    for label, samples, per_run, db_ms in rows:
        p90 = statistics.quantiles(samples, n=10)[-1]
        median, least = statistics.median(samples), min(samples)
        print(f"{label:<15} {median:>10.2f} {p90:>8.2f} {least:>8.2f} {per_run:>13.2f} {db_ms:>11.2f}")
    if phases:
        print("where an exec that opens a sandbox spends its time (median ms of each step):")
        for label, spent in phases.medians():
            print(f"  {label:<44} {spent:>7.2f}")
    if direct:
        ratio, least = statistics.median(live) / statistics.median(direct), min(live) / min(direct)
        print(f"live / bwrap directly: {ratio:.2f}x (median), {least:.2f}x (min)")


if __name__ == "__main__":
    main()

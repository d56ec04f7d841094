"""Benchmark a pool of sandbox hosts (issue 48): one host versus a pool of three, and 100 opens at once.

Each host is a real `manage.py runsandboxhost` process on a free loopback port, with its own token,
state directory and capacity, all on the app's workspaces (`<var>/workspaces`, disk measured on
both sides). Four are started: one for the "one host" config, three for the "pool of three"
config; the app's config is switched between them (`[sandbox] backend = "http"`, `hosts = [...]`)
and the runs alternate, one host, pool, one host, pool, so that a shared machine's slow spells
weigh on both alike. The app (notebook) declares a small sandbox (cpu 0.1, memory 64M) so that
placement by capacity runs; no per-user limit binds.

1. "open": the first exec (`true`) in a new item, through the API as bench/exec.py drives it:
   the pool's health refresh when due, admission with placement, the host's open, the exec.
   "live exec": `true` in an item whose sandbox is live (no placement).
2. `--concurrent` (100) items of as many people opened at once by `--threads` (16) threads, each
   the same first exec, over the pool of three (equal capacities, room for all): wall time,
   opens a second, each open's median and p90, where they landed (the ledger's rows and each
   host's own list), failures by error code; `--rounds` times, every sandbox closed in between.

Run: .venv/bin/python bench/pool.py [--runs 20] [--concurrent 100] [--threads 16] [--rounds 2] [--warm 0]
Uses a throwaway SQLite database (or --database-url) and temp directories; at the end every
sandbox is closed, the hosts stopped, whatever a host left is released and workspace images
unmounted. Prints milliseconds (median, p90, min) and the time of the open's steps. `--warm`
is each host's WORKSPACE_SANDBOX_WARM (0: every open starts its sandbox cold, as the pool tests'
hosts do; the service's default is 1). It asserts nothing about time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO, StepTimer, bench_var_dir, production_mode, setup_django

MANAGE = REPO / "manage.py"
# Each host costs about 2.5 s of CPU to start (Django's setup); four on two loaded cores take a while.
START_SECONDS = 60.0
STOP_SECONDS = 10.0
HOST_CAPACITY = {
    "SANDBOX_HOST_CAPACITY_CPU": "64",
    "SANDBOX_HOST_CAPACITY_MEMORY": "64G",
    "SANDBOX_HOST_CAPACITY_SANDBOXES": "200",
}
APP = 'slug = "notebook"\nname = "Notebook"\n[resources]\ncpu = 0.1\nmemory = "64M"\n'
# The first runs after the live sandbox opened share the machine with its settling; not timed.
_SETTLING_RUNS = 5


@dataclass
class Host:
    url: str
    token: str
    port: int
    process: subprocess.Popen
    var_dir: Path
    state_dir: Path
    stderr_path: Path

    def call(self, method: str, path: str, timeout: float = 10) -> tuple[int, dict]:
        request = urllib.request.Request(f"{self.url}{path}", method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else {}
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def running(self) -> int:
        status, listed = self.call("GET", "/sandboxes?older_than=0")
        return len(listed.get("sandboxes", [])) if status == 200 else -1

    def stderr_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.stderr_path.read_text(errors="replace")[-2000:]
        return ""


def _free_ports(count: int) -> list[int]:
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def _planned_hosts(var_dir: Path, count: int) -> list[tuple[int, str, Path]]:
    """(port, token, root) of each host; the tokens go to the app's settings before Django starts."""
    return [
        (port, f"bench-pool-{index}-{secrets.token_hex(8)}", var_dir / f"host-{index}")
        for index, port in enumerate(_free_ports(count))
    ]


def _spawn(var_dir: Path, port: int, token: str, root: Path, warm: int) -> Host:
    host_var, state_dir = root / "var", root / "state"
    for directory in (root, host_var, state_dir):
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o711)
    inherited = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SANDBOX_HOST_", "WORKSPACE_SANDBOX_HOST_TOKEN"))
    }
    env = {
        **inherited,
        **HOST_CAPACITY,
        "WORKSPACE_LOG_LEVEL": "WARNING",
        "WORKSPACE_VAR_DIR": str(host_var),
        # The pool shares the app's workspaces; the app refuses a host that does not.
        "SANDBOX_HOST_WORKSPACES": str(var_dir / "workspaces"),
        "SANDBOX_HOST_STATE_DIR": str(state_dir),
        "WORKSPACE_SANDBOX_HOST_TOKEN": token,
        "WORKSPACE_SANDBOX_WARM": str(warm),
    }
    stderr_path = root / "stderr.log"
    with stderr_path.open("ab") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(MANAGE), "runsandboxhost", "--port", str(port), "--bind", "127.0.0.1"],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    return Host(f"http://127.0.0.1:{port}", token, port, process, host_var, state_dir, stderr_path)


def _await_healthy(hosts: list[Host]) -> None:
    deadline = time.monotonic() + START_SECONDS
    pending = list(hosts)
    while pending:
        for host in list(pending):
            if host.process.poll() is not None:
                raise SystemExit(
                    f"sandbox host {host.url} exited with {host.process.returncode}:\n{host.stderr_tail()}"
                )
            try:
                status, _ = host.call("GET", "/healthz", timeout=2)
            except OSError:
                continue
            if status != 200:
                raise SystemExit(f"sandbox host {host.url} answered /healthz with {status}:\n{host.stderr_tail()}")
            pending.remove(host)
        if pending and time.monotonic() > deadline:
            raise SystemExit(f"sandbox hosts did not answer /healthz within {START_SECONDS:g} s")
        time.sleep(0.05)


def _stop_and_release(hosts: list[Host]) -> tuple[int, int]:
    """Stops the hosts, then closes what each left in its state directory (a host killed with
    SIGKILL leaves its sandboxes running) and unmounts the images under its directories."""
    from django.test.utils import override_settings

    from workspace.sandboxes.boundary import configured_boundary
    from workspace.sandboxes.isolation import configured_cap, configured_driver
    from workspace.sandboxes.local import LocalBackend
    from workspace.sandboxes.runner import kill_marked, marked_pids
    from workspace.sandboxes.volumes import unmount_under

    for host in hosts:
        if host.process.poll() is None:
            host.process.send_signal(signal.SIGTERM)
    for host in hosts:
        try:
            host.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            host.process.kill()
            host.process.wait(timeout=STOP_SECONDS)
    closed = unmounted = 0
    for host in hosts:
        ids = sorted(entry.name for entry in host.state_dir.iterdir() if entry.name.startswith("loc-"))
        with override_settings(WORKSPACE_VAR_DIR=host.var_dir):
            backend = LocalBackend(
                state_dir=host.state_dir,
                workspace_root=host.var_dir.parent.parent / "workspaces",
                driver=configured_driver(),
                boundary=configured_boundary(),
                cap=configured_cap(),
            )
            backend.warm.sweep()
            for sandbox_id in backend.sandboxes():
                backend.close(sandbox_id)
                closed += 1
        for sandbox_id in ids:
            kill_marked(marked_pids(sandbox_id), sandbox_id)
        unmounted += sum(unmount_under(directory) for directory in (host.var_dir, host.state_dir))
    return closed, unmounted


class _Steps(StepTimer):
    """Wall time of the open's steps while entered: the health refresh (and how often it asked a
    host), admission (its transaction, the wait for the write lock included), placement inside
    it, the host's open, the host's exec."""

    def __init__(self) -> None:
        from workspace.items import lifecycle, pool
        from workspace.sandboxes.http import HttpBackend

        super().__init__(
            [
                (pool, "hosts_refresh", "health refresh (every open; asks when due)"),
                (lifecycle, "before_sandbox_open", "admission (lock wait, quota gate, row)"),
                (pool, "placed_host", "  placement (reads the pool, locked)"),
                (HttpBackend, "open", "the host's open (HTTP)"),
                (HttpBackend, "exec_streaming", "the host's exec of `true` (HTTP)"),
            ]
        )

    def reset(self) -> None:
        super().reset()
        self.refreshes_asking = 0

    def seen(self, name: str, result: object) -> None:
        if name == "hosts_refresh" and result:
            self.refreshes_asking += 1

    def rows(self) -> list[tuple[str, list[float]]]:
        return [(label, spent) for label, spent in self.spent.items() if spent]


def _person(round_number: int, n: int) -> str:
    return f"person{round_number}-{n:03d}"


def _p90(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=10)[-1] if len(samples) > 1 else samples[0]


def _line(label: str, samples: list[float], width: int = 44) -> str:
    median, p90, least = statistics.median(samples), _p90(samples), min(samples)
    return f"{label:<{width}} {median:>9.2f} {p90:>8.2f} {least:>8.2f} {len(samples):>5}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="opens (and live execs) per configuration")
    parser.add_argument("--concurrent", type=int, default=100, help="items opened at once over the pool")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the concurrent opens")
    parser.add_argument("--warm", type=int, default=0, help="each host's WORKSPACE_SANDBOX_WARM")
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""))
    args = parser.parse_args()
    var_dir = bench_var_dir("bench-pool-")
    (var_dir / "workspaces").mkdir(mode=0o711)
    os.environ["WORKSPACE_VAR_DIR"] = str(var_dir)
    os.environ.setdefault("WORKSPACE_REQUEST_LOG_LEVEL", "WARNING")
    # The app and its hosts bound workspace disk the same way (the app refuses a host that does not).
    os.environ["WORKSPACE_DISK_ENFORCEMENT"] = "measure"
    # No per-person bound on commands at once: 100 people open at once in part 2 anyway.
    os.environ["WORKSPACE_EXEC_CONCURRENCY_PER_USER"] = "1000"
    # The people of the concurrent opens, each in the mock identity's directory.
    people = ["alice"] + [
        _person(round_number, n) for round_number in range(1, args.rounds + 1) for n in range(args.concurrent)
    ]
    users = var_dir / "users.json"
    users.write_text(
        json.dumps([{"id": user, "name": user, "section": "", "email": "", "photo_url": None} for user in people])
    )
    os.environ["WORKSPACE_MOCK_USERS_FILE"] = str(users)
    planned = _planned_hosts(var_dir, 4)
    os.environ["WORKSPACE_SANDBOX_HOST_TOKEN"] = ""
    os.environ["WORKSPACE_SANDBOX_HOST_TOKENS"] = json.dumps(
        {f"http://127.0.0.1:{port}": token for port, token, _ in planned}
    )
    production_mode("pool")
    # The hosts start (each its own Django) while the app migrates its database.
    hosts = [_spawn(var_dir, port, token, root, args.warm) for port, token, root in planned]
    try:
        vendor = setup_django(args.database_url, "pool")
        _await_healthy(hosts)
        _bench(args, vendor, var_dir, hosts)
    finally:
        _cleanup(hosts)


def _cleanup(hosts: list[Host]) -> None:
    from django.db import connection

    from collab.actor import Actor
    from quotas.models import SandboxActivity
    from workspace.items import services
    from workspace.items.models import Item

    closing = 0
    with contextlib.suppress(Exception):
        for item_id in sorted(set(SandboxActivity.current.values_list("item_id", flat=True))):
            with contextlib.suppress(Exception):
                closing += services.item_sandbox_close(item=Item.objects.get(pk=item_id), actor=Actor("bench"))
    connection.close()
    left, unmounted = _stop_and_release(hosts)
    print(
        f"\ncleanup: {closing} sandboxes closed through the service, {left} left by hosts released, "
        f"{unmounted} images unmounted"
    )


def _bench(args: argparse.Namespace, vendor: str, var_dir: Path, hosts: list[Host]) -> None:
    from django.conf import settings
    from rest_framework.test import APIClient

    from collab.actor import Actor
    from quotas.models import SandboxActivity
    from workspace.items import services
    from workspace.items.access import app_or_404
    from workspace.items.config import forget_loaded_config, get_config

    apps_dir = var_dir / "apps"
    apps_dir.mkdir()
    (apps_dir / "notebook.toml").write_text(APP)
    settings.WORKSPACE_APPS_DIR = str(apps_dir)
    solo, pool_hosts = hosts[:1], hosts[1:]
    configs = {}
    for name, chosen in (("one host", solo), ("pool of three", pool_hosts)):
        listed = ", ".join(f'"{host.url}"' for host in chosen)
        path = var_dir / f"{name.replace(' ', '-')}.toml"
        path.write_text(f'[sandbox]\nbackend = "http"\nhosts = [{listed}]\n')
        configs[name] = path
    names = list(configs)
    name_of = {host.url: f"h{index}" for index, host in enumerate(hosts)}

    def use(name: str) -> None:
        settings.WORKSPACE_CONFIG = str(configs[name])
        forget_loaded_config()
        get_config()  # read here, not in the timed request

    def new_item(user: str, title: str):
        return services.item_create(app=app_or_404("notebook"), title=title, actor=Actor(user))

    def exec_once(client: APIClient, item) -> tuple[float, int, str]:
        began = time.perf_counter()
        response = client.post(f"/a/notebook/items/{item.pk}/exec", {"command": ["true"]}, format="json")
        spent = (time.perf_counter() - began) * 1000
        error = "" if response.status_code == 200 else str(response.json().get("error", response.status_code))
        return spent, response.status_code, error

    client = APIClient()
    client.credentials(HTTP_X_USER_ID="alice")
    steps = _Steps()
    opened: dict[str, list[float]] = {name: [] for name in names}
    live: dict[str, list[float]] = {name: [] for name in names}
    items: dict[str, list] = {name: [] for name in names}
    failures: Counter[str] = Counter()
    # One untimed open per configuration (first requests import and warm up).
    for name in names:
        use(name)
        item = new_item("alice", f"warm-up {name}")
        exec_once(client, item)
        items[name].append(item)
    per_config_steps: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    with steps:
        for _ in range(args.runs):
            for name in names:
                use(name)
                item = new_item("alice", f"{name} {len(items[name])}")
                items[name].append(item)
                steps.reset()
                spent, status, error = exec_once(client, item)
                if status != 200:
                    failures[f"{name}: {error}"] += 1
                    continue
                opened[name].append(spent)
                for label, samples in steps.rows():
                    per_config_steps[name].setdefault(label, []).extend(samples)
    # Live execs: the last item of each configuration, whose sandbox is open.
    for name in names:
        use(name)
        for _ in range(_SETTLING_RUNS):
            exec_once(client, items[name][-1])
    for _ in range(args.runs):
        for name in names:
            use(name)
            spent, status, error = exec_once(client, items[name][-1])
            if status != 200:
                failures[f"{name} live: {error}"] += 1
                continue
            live[name].append(spent)
    landed = {
        name: Counter(
            name_of.get(host, host)
            for host in SandboxActivity.objects.filter(item_id__in=[item.pk for item in items[name]]).values_list(
                "host", flat=True
            )
        )
        for name in names
    }
    print(
        f"pool of sandbox hosts on {vendor}, {args.runs} runs per configuration (alternating), command `true`, "
        f"hosts' warm skeletons {args.warm}, load {Path('/proc/loadavg').read_text().split()[:3]}"
    )
    print(f"{'case':<44} {'median ms':>9} {'p90 ms':>8} {'min ms':>8} {'n':>5}")
    for name in names:
        print(_line(f"open, {name}", opened[name]))
    for name in names:
        print(_line(f"live exec, {name}", live[name]))
    for name in names:
        print(f"steps of an open, {name} (median, p90, min ms):")
        for label, samples in per_config_steps[name].items():
            print(_line(f"  {label}", samples))
    for name in names:
        print(f"opens landed, {name}: {dict(sorted(landed[name].items()))}")
    if failures:
        print(f"failures: {dict(failures)}")
    # Part 1's sandboxes close before the concurrent opens.
    use(names[1])
    for name in names:
        for item in items[name]:
            services.item_sandbox_close(item=item, actor=Actor("alice"))

    for round_number in range(1, args.rounds + 1):
        _concurrent_round(args, round_number, pool_hosts, name_of, new_item, exec_once, steps)


def _concurrent_round(args, round_number, pool_hosts, name_of, new_item, exec_once, steps) -> None:
    from django.db import connection
    from rest_framework.test import APIClient

    from collab.actor import Actor
    from quotas.models import SandboxActivity
    from workspace.items import services

    people = [_person(round_number, n) for n in range(args.concurrent)]
    items = [new_item(person, f"round {round_number} #{n}") for n, person in enumerate(people)]
    connection.close()
    results: list[tuple[float, int, str]] = []
    lock = threading.Lock()
    go = threading.Event()

    def open_one(index: int) -> None:
        client = APIClient()
        client.credentials(HTTP_X_USER_ID=people[index])
        go.wait()
        try:
            outcome = exec_once(client, items[index])
        except Exception as exc:  # an error the API did not turn into an answer
            outcome = (0.0, 0, type(exc).__name__)
        finally:
            connection.close()
        with lock:
            results.append(outcome)

    steps.reset()
    with steps, ThreadPoolExecutor(max_workers=args.threads, thread_name_prefix="open") as threads:
        futures = [threads.submit(open_one, index) for index in range(len(items))]
        began = time.perf_counter()
        go.set()
        for future in futures:
            future.result()
        wall = time.perf_counter() - began
    ok = [spent for spent, status, _ in results if status == 200]
    failures = Counter(error for _, status, error in results if status != 200)
    by_ledger = Counter(
        name_of.get(host, host)
        for host in SandboxActivity.current.filter(item_id__in=[item.pk for item in items]).values_list(
            "host", flat=True
        )
    )
    by_host = {name_of[host.url]: host.running() for host in pool_hosts}
    print(
        f"\n{len(items)} opens at once over the pool of three, {args.threads} threads, round {round_number}, "
        f"load {Path('/proc/loadavg').read_text().split()[:3]}"
    )
    print(
        f"wall {wall:.2f} s, {len(ok) / wall:.1f} opens/s; ok {len(ok)}, failed {sum(failures.values())} "
        f"{dict(failures) if failures else ''}"
    )
    print(f"{'case':<44} {'median ms':>9} {'p90 ms':>8} {'min ms':>8} {'n':>5}")
    if ok:
        print(_line("an open (first exec), at once", ok))
    for label, samples in steps.rows():
        print(_line(f"  {label}", samples))
    print(f"health refreshes that asked hosts: {steps.refreshes_asking}")
    print(f"landed by the ledger: {dict(sorted(by_ledger.items()))}; by each host's own list: {by_host}")
    began = time.perf_counter()
    for item in items:
        services.item_sandbox_close(item=item, actor=Actor(item.created_by or "bench"))
    print(f"closed {len(items)} sandboxes one after another in {time.perf_counter() - began:.2f} s")


if __name__ == "__main__":
    main()

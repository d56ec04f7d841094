"""Measures ASGI servers serving workspace.asgi on PostgreSQL: latency, slow clients, idle connections, shutdown.

Run (the servers live in a separate virtualenv, e.g. /tmp/asgi-venv, never the project's .venv):

    /tmp/asgi-venv/bin/python bench/asgi_servers.py --server granian
    /tmp/asgi-venv/bin/python bench/asgi_servers.py --server uvicorn --json-out /tmp/asgi-uvicorn.json
    /tmp/asgi-venv/bin/python bench/asgi_servers.py --name mine -- /path/to/server --port {port} APP
    /tmp/asgi-venv/bin/python bench/asgi_servers.py --server uvicorn --server daphne --server granian --rounds 12

Presets (--server): uvicorn (gunicorn -w 2 -k uvicorn_worker.UvicornWorker: httptools + uvloop), uvicorn-h11
(UvicornH11Worker: h11 + asyncio), daphne (one process), granian (--interface asgi --workers 2), gunicorn-asgi
(gunicorn's own `-k asgi` worker), workspace-uvicorn (the project's own uvicorn worker, where the checkout has
workspace/uvicorn_worker.py). After `--` any command may be given instead; `{port}` in it is replaced.

The database named by --database-url must exist and be migrated (`manage.py migrate` with the same python).
The script creates the user `asgibench`, a fresh API token of theirs and a notebook item (`manage.py shell -c`),
starts the server on a free loopback port (cwd = the repository, DEBUG off, Django accounts), and measures from
this process with asyncio raw sockets (wrk too, when installed):

1. GET /me with `Authorization: Token`: p50/p99 and requests/s at concurrency 1 and 8 on keep-alive connections.
2. Slow-loris: N connections send `GET /me HTTP/1.1` and Host, then one header line a second, never ending;
   GET /me on fresh connections meanwhile; when and how the server closes them; RSS and threads before/with.
3. N idle keep-alive connections (one request each): RSS and threads, and when the server closes them.
4. A slow body: POST /me/tokens, Content-Length 100000, 10 bytes a second: what the server does, and when.
5. A WebSocket handshake (the app is plain Django, so the answer shows what the server does with one).
6. A Server-Sent Events exec (three lines a second apart): time to the first byte against the whole stream.
7. GET /me on fresh connections while one exec `sleep` holds a request (sync Django views under ASGI).
8. SIGTERM with an exec `sleep` in flight (and an idle keep-alive connection, and a GET /me sent a second
   after the signal), then again on a new server with a stalled upload in flight: time until the server
   process exits, and what each client got.

With --server given more than once, only GET /me is measured, on all those servers running side by side, in
short bursts that take turns: on a machine that other jobs share, they then fall on every server alike. Each
figure also says how much CPU other processes took meanwhile (`other_cpu_cores`).

The server runs with DATABASE_CONN_MAX_AGE=0 unless --conn-max-age says otherwise: Django's ASGI handler runs
each request's sync code in a thread of its own, so a kept connection is never reused and they pile up until
PostgreSQL refuses more (try --conn-max-age 60).

RSS is VmRSS summed over the server's Python processes (sandbox processes excluded), threads likewise, from
/proc/<pid>/status. Everything runs on loopback; it asserts nothing about time. Every process it starts is
stopped (SIGTERM, then SIGKILL to its process group) and the item's sandboxes are released at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
APP = "workspace.asgi:application"
HOST = "127.0.0.1"
USER = "asgibench"

PRESETS: dict[str, list[str]] = {
    "uvicorn": ["gunicorn", "-w", "2", "-k", "uvicorn_worker.UvicornWorker", "--no-control-socket",
                "-b", f"{HOST}:{{port}}", APP],
    "uvicorn-h11": ["gunicorn", "-w", "2", "-k", "uvicorn_worker.UvicornH11Worker", "--no-control-socket",
                    "-b", f"{HOST}:{{port}}", APP],
    "daphne": ["daphne", "-b", HOST, "-p", "{port}", APP],
    "granian": ["granian", "--interface", "asgi", "--workers", "2", "--host", HOST, "--port", "{port}", APP],
    "gunicorn-asgi": ["gunicorn", "-w", "2", "-k", "asgi", "--no-control-socket", "-b", f"{HOST}:{{port}}", APP],
    "workspace-uvicorn": ["gunicorn", "-w", "2", "-k", "workspace.uvicorn_worker.WorkspaceUvicornWorker",
                          "--no-control-socket", "-b", f"{HOST}:{{port}}", APP],
}  # fmt: skip

SETUP = """
from django.contrib.auth.models import User
from collab import tokens
from collab.actor import Actor
from collab.models import ApiToken
from workspace.items.access import app_or_404
from workspace.items.models import Item
from workspace.items import services
User.objects.get_or_create(username="asgibench")
# Keep the newest tokens (another run may be using one), so the user stays under the per-user maximum.
kept = ApiToken.objects.filter(created_by="asgibench").order_by("-pk").values_list("pk", flat=True)[:10]
ApiToken.objects.filter(created_by="asgibench").exclude(pk__in=list(kept)).delete()
issued = tokens.token_create(actor=Actor("asgibench"), name="asgi bench")
item = Item.objects.filter(owner="asgibench", title="asgi bench").first() or services.item_create(
    app=app_or_404("notebook"), title="asgi bench", actor=Actor("asgibench"))
print("SETUP", issued.token, item.pk)
"""

RELEASE = 'from django.core.management import call_command\ncall_command("release_sandboxes")\n'


# ---------------------------------------------------------------- the server process


@dataclass
class Server:
    name: str
    command: list[str]
    env: dict[str, str]
    log: Path
    cwd: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    def start(self, startup: float = 90) -> None:
        self.port = free_port()
        argv = [part.replace("{port}", str(self.port)) for part in self.command]
        with self.log.open("ab") as sink:
            sink.write(f"\n=== {' '.join(argv)}\n".encode())
            sink.flush()
            self.process = subprocess.Popen(
                argv, cwd=self.cwd, env=self.env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + startup
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}; see {self.log}")
            with contextlib.suppress(OSError, ValueError, asyncio.IncompleteReadError):
                if asyncio.run(fetch(self.port, get_me(TOKEN), timeout=5))[0] == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not answer GET /me within {startup} s; see {self.log}")

    def pids(self) -> list[int]:
        """The server's own processes: the one started and its Python descendants (not sandboxes)."""
        if self.process is None or self.process.poll() is not None:
            return []
        return [pid for pid in descendants(self.process.pid) if is_server_process(pid)]

    def usage(self) -> dict[str, int]:
        rss = threads = 0
        pids = self.pids()
        for pid in pids:
            status = proc_status(pid)
            rss += status.get("VmRSS", 0)
            threads += status.get("Threads", 0)
        return {"rss_mib": round(rss / 1024), "threads": threads, "processes": len(pids)}

    def stop(self, grace: float = 40) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(grace)
        # Workers left behind by a main process that exited (or would not) go with its group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)


class Peaks:
    """Samples every half second the server's RSS and threads, its database's open connections, and the CPU
    that processes outside the measurement (not the server, this client, wrk or the database's backends of
    `database_url`) use meanwhile: another job on the machine shows up as `other_cpu_cores`."""

    def __init__(self, server: Server, database_url: str) -> None:
        self.server = server
        parts = urlsplit(database_url)
        self.database = parts.path.lstrip("/")
        self.admin_url = urlunsplit(parts._replace(path="/postgres"))
        self.peak: dict[str, float] = {"rss_mib": 0, "threads": 0, "db_connections": 0, "other_cpu_cores": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psycopg

        began = time.monotonic()
        other = 0.0
        before = cpu_by_process()
        with psycopg.connect(self.admin_url, autocommit=True) as db:
            while True:
                usage = self.server.usage()
                row = db.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [self.database])
                found = {**usage, "db_connections": int(row.fetchone()[0])}  # type: ignore[index]
                for key in ("rss_mib", "threads", "db_connections"):
                    self.peak[key] = max(self.peak[key], found[key])
                now = cpu_by_process()
                ours = self._ours(now)
                other += sum(now[pid][0] - before[pid][0] for pid in now if pid in before and pid not in ours)
                before = now
                self.peak["other_cpu_cores"] = round(other / CLOCK_TICKS / max(time.monotonic() - began, 0.1), 2)
                if self._stop.wait(0.5):
                    return

    def _ours(self, processes: dict[int, tuple[int, str]]) -> set[int]:
        ours = set(descendants(os.getpid()))
        if self.server.process is not None:
            ours.update(descendants(self.server.process.pid))
        for pid, (_, comm) in processes.items():
            if comm == "postgres":
                with contextlib.suppress(OSError):
                    if f" {self.database} ".encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                        ours.add(pid)
        return ours

    def __enter__(self) -> Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_by_process() -> dict[int, tuple[int, str]]:
    """pid -> (user + system CPU in clock ticks, command name) for every process."""
    found: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            found[int(entry.name)] = (int(fields[11]) + int(fields[12]), stat[stat.index("(") + 1 : stat.rindex(")")])
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def proc_status(pid: int) -> dict[str, int]:
    found: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "Threads"):
                found[key] = int(value.split()[0])
    return found


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def is_server_process(pid: int) -> bool:
    try:
        return Path(os.readlink(f"/proc/{pid}/exe")).name.startswith("python")
    except OSError:
        return False


def server_env(args: argparse.Namespace) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "WORKSPACE_", "GUNICORN", "GRANIAN"))}
    env.pop("WEB_CONCURRENCY", None)
    env.update(
        DATABASE_URL=args.database_url,
        DJANGO_SETTINGS_MODULE="workspace.settings",
        DJANGO_DEBUG="0",
        WORKSPACE_MOCK_IDENTITY="0",
        DJANGO_SECRET_KEY="asgi-bench-fixed-key-not-a-secret",
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        WORKSPACE_VAR_DIR=args.var_dir,
        DATABASE_CONN_MAX_AGE=args.conn_max_age,
    )
    return env


def run_manage(python: str, cwd: Path, env: dict[str, str], code: str) -> str:
    done = subprocess.run(
        [python, "manage.py", "shell", "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py shell failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


# ---------------------------------------------------------------- HTTP over raw sockets

TOKEN = ""


def get_me(token: str, *, close: bool = False) -> bytes:
    extra = "Connection: close\r\n" if close else ""
    return (
        f"GET /me HTTP/1.1\r\nHost: {HOST}\r\nAccept: application/json\r\nAuthorization: Token {token}\r\n{extra}\r\n"
    ).encode()


def post_json(path: str, token: str, body: dict[str, Any], accept: str = "application/json") -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nAccept: {accept}\r\nAuthorization: Token {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    if b"content-length" in headers:
        body = await reader.readexactly(int(headers[b"content-length"]))
    elif headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(parts)
    elif status in (101, 204, 304):
        body = b""
    else:
        body = await reader.read()
    return status, headers, body


async def fetch(port: int, raw: bytes, timeout: float = 60) -> tuple[int, bytes]:
    """One request on a fresh connection."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), timeout)
    try:
        writer.write(raw)
        status, _, body = await asyncio.wait_for(read_response(reader), timeout)
        return status, body
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def summary(times: list[float]) -> dict[str, float]:
    ms = [t * 1000 for t in times]
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 2) if ms else float("nan"),
        "p99_ms": round(percentile(ms, 0.99), 2),
        "max_ms": round(max(ms), 2) if ms else float("nan"),
    }


# ---------------------------------------------------------------- 1. latency and throughput


async def keepalive_load(port: int, concurrency: int, total: int) -> dict[str, Any]:
    """`total` GET /me over `concurrency` keep-alive connections: p50/p99 and requests/s."""
    times, errors, wall = await keepalive_times(port, concurrency, total)
    return {**summary(times), "concurrency": concurrency, "rps": round(len(times) / wall, 1), "errors": errors}


async def keepalive_times(port: int, concurrency: int, total: int) -> tuple[list[float], dict[str, int], float]:
    """`total` GET /me over `concurrency` keep-alive connections (reconnecting when the server closes one):
    each request's seconds, the errors by status or exception, the wall time."""
    raw = get_me(TOKEN)
    times: list[float] = []
    errors: dict[str, int] = {}
    remaining = [total]

    async def one_client() -> None:
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        while remaining[0] > 0:
            remaining[0] -= 1
            began = time.perf_counter()
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection(HOST, port)
                assert reader is not None
                writer.write(raw)
                status, headers, _ = await read_response(reader)
                times.append(time.perf_counter() - began)
                if status != 200:
                    errors[str(status)] = errors.get(str(status), 0) + 1
                if headers.get(b"connection", b"").lower() == b"close":
                    writer.close()
                    writer = None
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                if writer is not None:
                    writer.close()
                writer = None
        if writer is not None:
            writer.close()

    began = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(concurrency)))
    return times, errors, time.perf_counter() - began


def interleaved_load(servers: list[Server], database_url: str, rounds: int, burst: int) -> dict[str, Any]:
    """GET /me on several servers running side by side, in short bursts that take turns (the first server of
    a round rotates), so that other work on the machine falls on each alike: pooled p50/p99 per concurrency,
    the median (min-max) of the bursts' requests/s, and the other processes' CPU during the bursts."""
    for server in servers:
        asyncio.run(keepalive_times(server.port, 8, 300))  # warm-up: every worker, its DB connections
    times: dict[tuple[str, int], list[float]] = {}
    rates: dict[tuple[str, int], list[float]] = {}
    errors: dict[tuple[str, int], dict[str, int]] = {}
    other: dict[str, list[float]] = {}
    for n in range(rounds):
        for server in servers[n % len(servers) :] + servers[: n % len(servers)]:
            for concurrency in (1, 8):
                key = (server.name, concurrency)
                with Peaks(server, database_url) as peaks:
                    burst_times, burst_errors, wall = asyncio.run(keepalive_times(server.port, concurrency, burst))
                times.setdefault(key, []).extend(burst_times)
                rates.setdefault(key, []).append(len(burst_times) / wall)
                for error, count in burst_errors.items():
                    errors.setdefault(key, {})[error] = errors.get(key, {}).get(error, 0) + count
                other.setdefault(server.name, []).append(peaks.peak["other_cpu_cores"])
        print(f"interleaved load: round {n + 1} of {rounds} done", flush=True)
    return {
        server.name: {
            **{
                f"c{c}": {
                    **summary(times[(server.name, c)]),
                    "rps_median": round(statistics.median(rates[(server.name, c)]), 1),
                    "rps_min_max": [round(min(rates[(server.name, c)]), 1), round(max(rates[(server.name, c)]), 1)],
                    "errors": errors.get((server.name, c), {}),
                }
                for c in (1, 8)
            },
            "other_cpu_cores_median": round(statistics.median(other[server.name]), 2),
            "other_cpu_cores_max": max(other[server.name]),
        }
        for server in servers
    }


def wrk_load(port: int, concurrency: int, seconds: int) -> dict[str, Any] | None:
    if not shutil.which("wrk"):
        return None
    done = subprocess.run(
        ["wrk", "-t1", f"-c{concurrency}", f"-d{seconds}s", "--latency", "-H", f"Authorization: Token {TOKEN}",
         "-H", "Accept: application/json", f"http://{HOST}:{port}/me"],
        capture_output=True, text=True, timeout=seconds + 60, check=False,
    )  # fmt: skip
    text = done.stdout

    def ms(label: str) -> float | None:
        found = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        if not found:
            return None
        value, unit = float(found.group(1)), found.group(2)
        return round(value / 1000 if unit == "us" else value * 1000 if unit == "s" else value, 2)

    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return {
        "concurrency": concurrency,
        "seconds": seconds,
        "p50_ms": ms("50"),
        "p99_ms": ms("99"),
        "rps": float(rps.group(1)) if rps else None,
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
    }


# ---------------------------------------------------------------- slow and idle connections


@dataclass
class Held:
    """One connection the test holds open: when it opened and when (and how) the server ended it."""

    opened: float = 0.0
    closed_after: float | None = None  # seconds after `opened` (or after its response, for idle ones)
    answer: str = ""  # the status line the server sent before closing, if any
    answered_after: float | None = None  # seconds after `opened` when that status line came
    error: str = ""


def closures(held: list[Held]) -> dict[str, Any]:
    ended = [h.closed_after for h in held if h.closed_after is not None]
    answers: dict[str, int] = {}
    for h in held:
        if h.closed_after is not None:
            key = h.answer or "(closed without an answer)"
            answers[key] = answers.get(key, 0) + 1
    return {
        "connections": len(held),
        "closed_by_server": len(ended),
        "close_after_s_min": round(min(ended), 1) if ended else None,
        "close_after_s_median": round(statistics.median(ended), 1) if ended else None,
        "close_after_s_max": round(max(ended), 1) if ended else None,
        "answers": answers,
        "open_errors": sum(1 for h in held if h.error),
    }


async def watch_until_closed(reader: asyncio.StreamReader, held: Held, since: float) -> None:
    """Reads until EOF or reset; notes the first status line and when the connection ended."""
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            if not held.answer and data.startswith(b"HTTP/"):
                held.answer = data.split(b"\r\n", 1)[0].decode(errors="replace")
                held.answered_after = time.monotonic() - since
    except OSError as exc:
        held.answer = held.answer or f"({type(exc).__name__})"
    held.closed_after = time.monotonic() - since


async def slow_loris_connection(port: int, held: Held, stop: asyncio.Event, interval: float) -> None:
    try:
        reader, writer = await asyncio.open_connection(HOST, port)
    except OSError as exc:
        held.error = type(exc).__name__
        return
    held.opened = time.monotonic()
    watcher = asyncio.create_task(watch_until_closed(reader, held, held.opened))
    try:
        writer.write(b"GET /me HTTP/1.1\r\nHost: x\r\n")
        while not stop.is_set() and not watcher.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)
            if stop.is_set() or watcher.done():
                break
            writer.write(b"X-a: b\r\n")
            with contextlib.suppress(OSError):
                await writer.drain()
    except OSError:
        pass
    finally:
        if not watcher.done():
            watcher.cancel()
        writer.close()


async def fresh_connection_probe(port: int, count: int) -> dict[str, Any]:
    """`count` GET /me one after another, each on a new connection (connect time included)."""
    times: list[float] = []
    errors: dict[str, int] = {}
    for _ in range(count):
        began = time.perf_counter()
        try:
            status, _ = await fetch(port, get_me(TOKEN, close=True), timeout=60)
            times.append(time.perf_counter() - began)
            if status != 200:
                errors[str(status)] = errors.get(str(status), 0) + 1
        except (OSError, asyncio.IncompleteReadError, ValueError, TimeoutError) as exc:
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
    return {**summary(times), "errors": errors}


async def wait_all(held: list[Held], until: float, stop: asyncio.Event | None = None) -> None:
    while time.monotonic() < until and any(h.closed_after is None and not h.error for h in held):
        await asyncio.sleep(0.5)
    if stop is not None:
        stop.set()


async def slow_loris(server: Server, count: int, observe: float, probes: int) -> dict[str, Any]:
    before = server.usage()
    stop = asyncio.Event()
    held = [Held() for _ in range(count)]
    tasks = []
    for h in held:
        tasks.append(asyncio.create_task(slow_loris_connection(server.port, h, stop, 1.0)))
        await asyncio.sleep(0.002)
    started = time.monotonic()
    await asyncio.sleep(3)
    with_them = server.usage()
    open_at_sample = sum(1 for h in held if h.closed_after is None and not h.error)
    probe = await fresh_connection_probe(server.port, probes)
    await wait_all(held, started + observe, stop)
    await asyncio.gather(*tasks, return_exceptions=True)
    result = {
        "usage_before": before,
        "usage_with": with_them,
        "open_when_sampled": open_at_sample,
        "me_on_fresh_connections": probe,
        "observed_s": round(time.monotonic() - started, 1),
        **closures(held),
    }
    await asyncio.sleep(3)  # the server notices our closes before the next test
    return result


async def idle_keepalive(server: Server, count: int, observe: float) -> dict[str, Any]:
    before = server.usage()
    held = [Held() for _ in range(count)]
    writers: list[asyncio.StreamWriter] = []
    watchers: list[asyncio.Task[None]] = []
    gate = asyncio.Semaphore(8)

    async def one(h: Held) -> None:
        async with gate:
            try:
                reader, writer = await asyncio.open_connection(HOST, server.port)
                writer.write(get_me(TOKEN))
                status, _, _ = await read_response(reader)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                h.error = type(exc).__name__
                return
            if status != 200:
                h.error = f"status {status}"
            h.opened = time.monotonic()  # idle from here
            writers.append(writer)
            watchers.append(asyncio.create_task(watch_until_closed(reader, h, h.opened)))

    began = time.monotonic()
    await asyncio.gather(*(one(h) for h in held))
    opening = time.monotonic() - began
    await asyncio.sleep(0.5)
    with_them = server.usage()
    open_at_sample = sum(1 for h in held if h.closed_after is None and not h.error)
    await wait_all(held, began + observe)
    for writer in writers:
        writer.close()
    for watcher in watchers:
        watcher.cancel()
    result = {
        "usage_before": before,
        "usage_with": with_them,
        "open_when_sampled": open_at_sample,
        "opening_s": round(opening, 1),
        "observed_s": round(time.monotonic() - began, 1),
        **closures(held),
    }
    await asyncio.sleep(3)
    return result


async def slow_body(server: Server, observe: float, length: int = 100_000, rate: int = 10) -> dict[str, Any]:
    """POST /me/tokens announcing `length` bytes, sending `rate` bytes a second, until the server ends it."""
    reader, writer = await asyncio.open_connection(HOST, server.port)
    head = (
        f"POST /me/tokens HTTP/1.1\r\nHost: {HOST}\r\nAccept: application/json\r\nAuthorization: Token {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
    held = Held(opened=time.monotonic())
    writer.write(head.encode())
    watcher = asyncio.create_task(watch_until_closed(reader, held, held.opened))
    sent = 0
    probe: asyncio.Task[dict[str, Any]] | None = None
    try:
        while time.monotonic() - held.opened < observe and not watcher.done() and sent < length:
            writer.write(b" " * rate)
            sent += rate
            with contextlib.suppress(OSError):
                await writer.drain()
            if probe is None and time.monotonic() - held.opened > 5:
                probe = asyncio.create_task(fresh_connection_probe(server.port, 20))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(watcher), 1.0)
    except OSError as exc:
        held.error = type(exc).__name__
    finally:
        still_open = not watcher.done()
        watcher.cancel()
        writer.close()
    await asyncio.sleep(1)
    return {
        "bytes_sent": sent,
        "ended_by_server_after_s": None if held.closed_after is None else round(held.closed_after, 1),
        "answer": held.answer,
        "answered_after_s": None if held.answered_after is None else round(held.answered_after, 1),
        "write_error": held.error,
        "still_open_at_end_of_observation": still_open,
        "observed_s": observe,
        "me_on_fresh_connections_meanwhile": await probe if probe is not None else None,
    }


async def websocket_probe(server: Server) -> dict[str, Any]:
    reader, writer = await asyncio.open_connection(HOST, server.port)
    writer.write(
        f"GET /ws HTTP/1.1\r\nHost: {HOST}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    try:
        data = await asyncio.wait_for(reader.read(4096), 10)
    except (TimeoutError, OSError) as exc:
        data = f"({type(exc).__name__})".encode()
    finally:
        writer.close()
    return {"first_line": data.split(b"\r\n", 1)[0].decode(errors="replace") or "(closed without an answer)"}


# ---------------------------------------------------------------- the app's long requests


async def sse_exec(server: Server, item: int) -> dict[str, Any]:
    """An exec streamed as Server-Sent Events whose command prints a line a second for three seconds."""
    command = {"command": ["sh", "-c", "for i in 1 2 3; do echo $i; sleep 1; done"]}
    raw = post_json(f"/a/notebook/items/{item}/exec", TOKEN, command, accept="text/event-stream")
    reader, writer = await asyncio.open_connection(HOST, server.port)
    began = time.perf_counter()
    writer.write(raw)
    first_byte: float | None = None
    body_events: list[float] = []
    head = b""
    try:
        while True:
            data = await asyncio.wait_for(reader.read(65536), 60)
            if not data:
                break
            now = time.perf_counter() - began
            if first_byte is None:
                first_byte = now
            head += data
            if b"\r\n\r\n" in head:
                body_events.extend(now for _ in range(data.count(b"event: ")))
            if b"event: result" in head:
                break
    finally:
        writer.close()
    return {
        "status_line": head.split(b"\r\n", 1)[0].decode(errors="replace"),
        "first_byte_s": round(first_byte, 2) if first_byte is not None else None,
        "last_event_s": round(body_events[-1], 2) if body_events else None,
        "first_event_s": round(body_events[0], 2) if body_events else None,
        "events": len(body_events),
    }


async def exec_request(port: int, item: int, seconds: float) -> tuple[str, float, float]:
    """An exec of `sleep seconds`: the answer's status (or how the connection ended), its duration, its end."""
    raw = post_json(f"/a/notebook/items/{item}/exec", TOKEN, {"command": ["sleep", str(seconds)]})
    began = time.monotonic()
    try:
        status, body = await fetch(port, raw, timeout=seconds + 120)
        outcome = str(status) if status == 200 else f"{status} {body[:120].decode(errors='replace')}"
    except asyncio.IncompleteReadError:
        outcome = "closed without an answer"
    except OSError as exc:
        outcome = f"({type(exc).__name__})"
    return outcome, round(time.monotonic() - began, 2), time.monotonic()


async def head_of_line(server: Server, item: int, seconds: float, probes: int) -> dict[str, Any]:
    await exec_request(server.port, item, 0)  # opens the item's sandbox first
    long = asyncio.create_task(exec_request(server.port, item, seconds))
    await asyncio.sleep(0.5)
    times: list[float] = []
    began = time.monotonic()
    while len(times) < probes and time.monotonic() - began < seconds - 1:
        t0 = time.perf_counter()
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, ValueError):
            await fetch(server.port, get_me(TOKEN, close=True), timeout=60)
        times.append(time.perf_counter() - t0)
        await asyncio.sleep(0.05)
    outcome, took, _ = await long
    return {"exec_sleep_s": seconds, "exec": outcome, "exec_took_s": took, **summary(times)}


async def shutdown_with(server: Server, setup: Callable[[], Awaitable[dict[str, Any]]], wait: float) -> dict[str, Any]:
    """SIGTERM the server while `setup`'s connections are in flight; how long until its main process exits
    (up to `wait` seconds), and what each connection got, in seconds after the signal."""
    assert server.process is not None
    watched = await setup()
    signalled = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    late = asyncio.create_task(request_after(server.port, 1.0, signalled))
    refused_at: float | None = None
    exited: float | None = None
    deadline = signalled + wait
    while time.monotonic() < deadline:
        if refused_at is None:
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(HOST, server.port), 1)
                writer.close()
            except (OSError, TimeoutError):
                refused_at = time.monotonic() - signalled
        if server.process.poll() is not None:
            exited = time.monotonic() - signalled
            break
        await asyncio.sleep(0.1)
    results: dict[str, Any] = {}
    for name, task in watched.items():
        if name.startswith("_"):
            continue
        if isinstance(task, asyncio.Task):
            if not task.done():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(task), 2)
            if task.done() and not task.cancelled():
                outcome, took, ended = task.result()
                results[name] = {"answer": outcome, "took_s": took, "after_sigterm_s": round(ended - signalled, 1)}
            else:
                results[name] = "no answer yet"
        elif isinstance(task, Held):
            ended = None if task.closed_after is None else round(task.opened + task.closed_after - signalled, 1)
            results[name] = {"closed_after_sigterm_s": ended, "answer": task.answer}
    for task in watched.values():
        if isinstance(task, asyncio.Task):
            task.cancel()
        elif isinstance(task, asyncio.StreamWriter):
            task.close()
    left = [pid for pid in descendants(server.process.pid) if is_server_process(pid)] if exited is None else []
    if not late.done():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(late), 2)
    late.cancel()
    return {
        "exit_after_s": None if exited is None else round(exited, 1),
        "returncode": server.process.returncode,
        "new_connections_refused_after_s": None if refused_at is None else round(refused_at, 1),
        "get_me_sent_1s_after_sigterm": late.result() if late.done() and not late.cancelled() else "no answer yet",
        "processes_left_when_main_exited": len(left),
        **results,
    }


async def request_after(port: int, delay: float, since: float) -> dict[str, Any]:
    """GET /me on a new connection `delay` seconds in: its answer (or how it failed), in seconds after `since`."""
    await asyncio.sleep(delay)
    try:
        status, _ = await fetch(port, get_me(TOKEN, close=True), timeout=120)
        outcome = str(status)
    except asyncio.IncompleteReadError:
        outcome = "closed without an answer"
    except (OSError, TimeoutError) as exc:
        outcome = f"({type(exc).__name__})"
    return {"answer": outcome, "after_sigterm_s": round(time.monotonic() - since, 1)}


async def shutdown_exec(server: Server, item: int, seconds: float, wait: float) -> dict[str, Any]:
    async def setup() -> dict[str, Any]:
        await exec_request(server.port, item, 0)
        idle = Held()
        reader, writer = await asyncio.open_connection(HOST, server.port)
        writer.write(get_me(TOKEN))
        await read_response(reader)
        idle.opened = time.monotonic()
        watcher = asyncio.create_task(watch_until_closed(reader, idle, idle.opened))
        long = asyncio.create_task(exec_request(server.port, item, seconds))
        await asyncio.sleep(1.5)
        return {"exec": long, "idle_keepalive": idle, "_watch": watcher}

    found = await shutdown_with(server, setup, wait)
    return {"exec_sleep_s": seconds, "sigterm_after_exec_began_s": 1.5, **found}


async def shutdown_upload(server: Server, wait: float) -> dict[str, Any]:
    async def setup() -> dict[str, Any]:
        reader, writer = await asyncio.open_connection(HOST, server.port)
        writer.write(
            f"POST /me/tokens HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Token {TOKEN}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{".encode()
        )
        upload = Held(opened=time.monotonic())
        watcher = asyncio.create_task(watch_until_closed(reader, upload, upload.opened))
        await asyncio.sleep(1.5)
        return {"stalled_upload": upload, "_watch": watcher, "_writer": writer}

    return await shutdown_with(server, setup, wait)


# ---------------------------------------------------------------- the run


@dataclass
class Run:
    server: str
    command: str
    figures: dict[str, Any] = field(default_factory=dict)


def printable(value: Any) -> str:
    return json.dumps(value, default=str)


def main() -> None:
    global TOKEN
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--server",
        action="append",
        choices=sorted(PRESETS),
        help="a preset command (binaries from --bin-dir); given more than once: only GET /me, interleaved",
    )
    parser.add_argument("--rounds", type=int, default=10, help="interleaved: rounds of bursts")
    parser.add_argument("--burst", type=int, default=500, help="interleaved: requests per burst")
    parser.add_argument(
        "--name", default="", help="the label of the run (default: the preset, or the command's program)"
    )
    parser.add_argument("--bin-dir", default=str(Path(sys.executable).parent), help="where the presets' binaries are")
    parser.add_argument(
        "--repo",
        default=str(REPO),
        help="the checkout to serve (cwd of the server), e.g. a `git archive HEAD` copy while the tree changes",
    )
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/asgi_bench")
    parser.add_argument("--var-dir", default="/tmp/asgi-bench-var", help="WORKSPACE_VAR_DIR of the server")
    parser.add_argument("--requests", type=int, default=3000, help="timed GET /me per concurrency level")
    parser.add_argument("--connections", type=int, default=500, help="slow-loris and idle connections")
    parser.add_argument("--observe", type=float, default=130, help="seconds to wait for the server to end them")
    parser.add_argument("--probes", type=int, default=200, help="GET /me on fresh connections under slow-loris")
    parser.add_argument("--exec-seconds", type=float, default=10, help="the long request's sleep")
    parser.add_argument(
        "--conn-max-age",
        default="0",
        help="DATABASE_CONN_MAX_AGE of the server (the settings' default, 60, leaks a connection per request "
        "under ASGI: each request runs in a thread of its own)",
    )
    parser.add_argument("--shutdown-wait", type=float, default=75, help="seconds to wait for exit after SIGTERM")
    parser.add_argument("--skip", default="", help="comma-separated: load,wrk,loris,idle,body,ws,sse,hol,shutdown")
    parser.add_argument("--json-out", default="", help="also write the figures as JSON to this file")
    parser.add_argument("command", nargs="*", help="after --: a server command; {port} is replaced")
    args = parser.parse_args()
    if bool(args.command) == bool(args.server):
        parser.error("give either --server or a command after --")
    commands = {
        preset: [str(Path(args.bin_dir) / PRESETS[preset][0]), *PRESETS[preset][1:]] for preset in args.server or []
    }
    command = next(iter(commands.values())) if commands else args.command
    Path(args.var_dir).mkdir(parents=True, exist_ok=True)
    Path(args.var_dir).chmod(0o711)
    env = server_env(args)
    cwd = Path(args.repo).resolve()
    python = str(Path(command[0]).parent / "python") if args.server else sys.executable
    setup = [line for line in run_manage(python, cwd, env, SETUP).splitlines() if line.startswith("SETUP ")][-1].split()
    TOKEN, item = setup[1], int(setup[2])
    if len(commands) > 1:
        servers = [Server(n, c, env, Path(f"/tmp/asgi-bench-{n}-interleaved.log"), cwd) for n, c in commands.items()]
        try:
            for server in servers:
                server.log.write_bytes(b"")
                server.start()
            found = interleaved_load(servers, args.database_url, args.rounds, args.burst)
        finally:
            for server in servers:
                server.stop()
        for label, figures in found.items():
            print(f"[{label}] interleaved GET /me: {printable(figures)}")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(found, indent=1))
        return
    name = args.name or (args.server[0] if args.server else Path(command[0]).name)
    skip = set(filter(None, args.skip.split(",")))
    log = Path(f"/tmp/asgi-bench-{name}.log")
    log.write_bytes(b"")
    run = Run(name, " ".join(command) + f"  (cwd {cwd}, DATABASE_CONN_MAX_AGE={args.conn_max_age})")
    server = Server(name, command, env, log, cwd)
    figures = run.figures

    def step(key: str, work: Callable[[], Any]) -> None:
        began = time.monotonic()
        with Peaks(server, args.database_url) as peaks:
            figures[key] = work()
        if isinstance(figures[key], dict):
            figures[key]["peaks"] = peaks.peak
        print(f"[{name}] {key} ({time.monotonic() - began:.0f} s): {printable(figures[key])}", flush=True)

    try:
        server.start()
        figures["usage_at_start"] = server.usage()
        if "load" not in skip:
            asyncio.run(keepalive_load(server.port, 8, 300))  # warm-up: both workers, their DB connections
            step("me_c1", lambda: asyncio.run(keepalive_load(server.port, 1, args.requests)))
            step("me_c8", lambda: asyncio.run(keepalive_load(server.port, 8, args.requests)))
        if "wrk" not in skip:
            step("wrk_c8_10s", lambda: wrk_load(server.port, 8, 10))
        if "loris" not in skip:
            step("slow_loris", lambda: asyncio.run(slow_loris(server, args.connections, args.observe, args.probes)))
        if "idle" not in skip:
            step("idle_keepalive", lambda: asyncio.run(idle_keepalive(server, args.connections, args.observe)))
        if "body" not in skip:
            step("slow_body", lambda: asyncio.run(slow_body(server, args.observe)))
        if "ws" not in skip:
            step("websocket_handshake", lambda: asyncio.run(websocket_probe(server)))
        if "sse" not in skip:
            step("sse_exec_stream", lambda: asyncio.run(sse_exec(server, item)))
        if "hol" not in skip:
            step("me_during_one_exec", lambda: asyncio.run(head_of_line(server, item, args.exec_seconds, 40)))
        if "shutdown" not in skip:
            wait = args.shutdown_wait
            step("sigterm_with_exec", lambda: asyncio.run(shutdown_exec(server, item, args.exec_seconds, wait)))
            server.stop(grace=1)
            server.start()
            step("sigterm_with_stalled_upload", lambda: asyncio.run(shutdown_upload(server, wait)))
            server.stop(grace=1)
    finally:
        server.stop()
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            run_manage(python, cwd, env, RELEASE)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(asdict(run), indent=1, default=str))
    print(f"[{name}] done; served {cwd}; server log {log}")


if __name__ == "__main__":
    main()

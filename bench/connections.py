"""Connections that must cost no thread (issue 41): `make serve` on PostgreSQL under trickled headers,
idle open streams, several people's long commands and a hostile model server; `GET /me` with a token
meanwhile, and the app processes' memory and threads.

Run: .venv/bin/python bench/connections.py [--repo PATH] [--workers 2] [--connections 500] [--only NAME ...]

`--repo` serves another checkout (an older commit, for a figure "before"); its own virtualenv runs
it when it has one. Each scenario starts gunicorn with that checkout's workspace/gunicorn.conf.py on a
throwaway database and stops it after. `/me` is asked 200 times, one connection each, while the load
holds; p50/p99 are in ms, `timeouts` counts those not answered within 5 s (when the first ten all
time out, no more are asked). Memory is the sum of the
app processes' RSS (the gunicorn master and the periodic worker left out). Prints one JSON object per
scenario; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.live import (  # noqa: E402
    DEFAULT_SERVER_URL,
    Client,
    Server,
    children_of,
    close_sandboxes,
    gunicorn,
    migrate,
    production_env,
    run_django,
    throwaway_database,
)
from tests.fixtures.agent import model_descriptors  # noqa: E402
from tests.fixtures.llm import Endless, LlmServer  # noqa: E402

PASSWORD = "bench-secret-1"
PEOPLE = ("alice", "bob", "carol", "dave")
ACCOUNTS = f"""
from django.contrib.auth.models import User
for name in {list(PEOPLE)!r}:
    User.objects.create_user(name, password={PASSWORD!r})
"""
ME_REQUESTS = 200
ME_GIVE_UP = 5.0
ME_GIVE_UP_AFTER = 10


def _rss_and_threads(server: Server) -> tuple[int, int]:
    """The app processes' RSS (bytes) and threads: gunicorn's workers, not its master or the periodic worker."""
    rss = threads = 0
    for pid in children_of(server.process.pid):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            if b"manage.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        rss += int(fields["VmRSS"].split()[0]) * 1024
        threads += int(fields["Threads"])
    return rss, threads


def _me_latencies(port: int, token: str) -> dict[str, Any]:
    """`GET /me` ME_REQUESTS times, a connection each; p50/p99 of those answered, and how many were not."""
    times: list[float] = []
    timeouts = 0
    for asked in range(ME_REQUESTS):
        if timeouts >= ME_GIVE_UP_AFTER and timeouts == asked:
            break  # a server that answers none of the first ones answers none: asking on costs minutes
        started = time.perf_counter()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=ME_GIVE_UP) as sock:
                sock.sendall(
                    f"GET /me HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
                    "Connection: close\r\n\r\n".encode()
                )
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
            if not answer.startswith(b"HTTP/1.1 200"):
                timeouts += 1
                continue
            times.append((time.perf_counter() - started) * 1000)
        except OSError:
            timeouts += 1
    times.sort()
    pick = (lambda q: round(times[min(int(q * len(times)), len(times) - 1)], 1)) if times else (lambda q: None)
    asked = len(times) + timeouts
    return {"me_p50_ms": pick(0.5), "me_p99_ms": pick(0.99), "me_timeouts": f"{timeouts} of {asked}"}


def _token(server: Server, name: str) -> str:
    client = Client(server.port, timeout=30)
    client.login(name, PASSWORD)
    made = client.request("POST", "/me/tokens", {"name": "bench"})
    client.close()
    return made.json()["token"]


@contextmanager
def _serving(repo: Path, database_url: str, workers: int, **settings: str) -> Iterator[tuple[Server, dict[str, str]]]:
    folder = Path(tempfile.mkdtemp(prefix="bench-connections-"))
    folder.chmod(0o711)
    config = folder / "bench.toml"
    config.write_text('[sandbox]\nexec_timeout = "600s"\nexec_timeout_max = "600s"\npids = 4096\n')
    apps = folder / "apps"
    apps.mkdir()
    for name, text in model_descriptors().items():
        (apps / name).write_text(text)
    env = production_env(
        database_url,
        folder / "var",
        WORKSPACE_SERVE_PREPARE="0",
        WORKSPACE_SERVE_WORKER="0",
        WORKSPACE_CONFIG=str(config),
        WORKSPACE_APPS_DIR=str(apps),
        **settings,
    )
    migrate(env)
    run_django(ACCOUNTS, env)
    python = repo / ".venv" / "bin" / "python"
    try:
        with gunicorn(
            env, folder / "gunicorn.log", workers=workers, config=repo / "workspace" / "gunicorn.conf.py",
            python=str(python) if python.exists() else sys.executable, cwd=repo,
        ) as server:  # fmt: skip
            yield server, env
    finally:
        close_sandboxes(env)


def trickled_headers(server: Server, env: dict[str, str], connections: int) -> dict[str, Any]:
    token = _token(server, "bob")
    rss_before, threads_before = _rss_and_threads(server)
    socks = []
    for _ in range(connections):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        sock.sendall(b"GET /me HTTP/1.1\r\nHost: x\r\n")
        socks.append(sock)
    stop = threading.Event()

    def trickle() -> None:
        while not stop.wait(1.0):
            for sock in socks:
                try:
                    sock.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    continue

    trickling = threading.Thread(target=trickle, daemon=True)
    trickling.start()
    time.sleep(2)
    rss, threads = _rss_and_threads(server)
    figures = _me_latencies(server.port, token)
    stop.set()
    for sock in socks:
        sock.close()
    return {
        **figures,
        "connections": connections,
        "rss_per_connection_kb": round((rss - rss_before) / connections / 1024, 1),
        "threads_before": threads_before,
        "threads_with": threads,
    }


SLEEPING_ITEMS = 10


def idle_streams(server: Server, env: dict[str, str], connections: int) -> dict[str, Any]:
    """`connections` exec streams of `sleep 120`, spread over SLEEPING_ITEMS items of one person, each
    read up to its `started` event and then left open, silent."""
    token = _token(server, "bob")
    client = Client(server.port, timeout=60)
    client.login("bob", PASSWORD)
    items = [
        client.request("POST", "/a/notebook/items", {"title": f"idle {n}"}).json()["id"] for n in range(SLEEPING_ITEMS)
    ]
    for item in items:
        client.request("POST", f"/a/notebook/items/{item}/exec", {"command": "true"})
    rss_before, threads_before = _rss_and_threads(server)
    cookies = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    body = json.dumps({"command": ["sleep", "120"]}).encode()
    socks = []
    for number in range(connections):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        sock.sendall(
            f"POST /a/notebook/items/{items[number % len(items)]}/exec HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Cookie: {cookies}\r\nX-CSRFToken: {client.cookies['csrftoken']}\r\nAccept: text/event-stream\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        socks.append(sock)
    # Each stream read up to its `started` event, all of them within a minute (a server that cannot
    # open them all leaves the rest waiting: they count as not open).
    opened = 0
    give_up = time.monotonic() + 60
    for sock in socks:
        received = b""
        try:
            while b"\r\n\r\n" not in received or (b" 200 " in received[:20] and b"event: started" not in received):
                sock.settimeout(max(give_up - time.monotonic(), 0.01))
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        except OSError:
            pass
        opened += b"event: started" in received
    time.sleep(2)
    rss, threads = _rss_and_threads(server)
    figures = _me_latencies(server.port, token)
    for sock in socks:
        sock.close()
    return {
        **figures,
        "streams_asked": connections,
        "streams_open": opened,
        "rss_per_stream_kb": round((rss - rss_before) / max(opened, 1) / 1024, 1),
        "threads_before": threads_before,
        "threads_with": threads,
    }


def long_commands(server: Server, env: dict[str, str], connections: int) -> dict[str, Any]:
    """Four people each running three `sleep 35` (plain JSON execs, the answer at the end)."""
    tokens = {name: _token(server, name) for name in PEOPLE}
    clients = {}
    for name in PEOPLE:
        clients[name] = Client(server.port, timeout=120)
        clients[name].login(name, PASSWORD)
    items = {
        name: clients[name].request("POST", "/a/notebook/items", {"title": "long"}).json()["id"] for name in PEOPLE
    }
    for name in PEOPLE:
        clients[name].request("POST", f"/a/notebook/items/{items[name]}/exec", {"command": "true"})
    statuses: list[int] = []

    def run(name: str) -> None:
        client = Client(server.port, timeout=120)
        client.cookies = dict(clients[name].cookies)
        statuses.append(client.request("POST", f"/a/notebook/items/{items[name]}/exec", {"command": "sleep 35"}).status)

    runners = [threading.Thread(target=run, args=(name,), daemon=True) for name in PEOPLE for _ in range(3)]
    for runner in runners:
        runner.start()
    time.sleep(3)
    _rss, threads = _rss_and_threads(server)
    figures = _me_latencies(server.port, tokens["alice"])
    for runner in runners:
        runner.join(120)
    return {**figures, "commands": len(runners), "threads_with": threads, "statuses": sorted(set(statuses))}


def hostile_model(
    server: Server, env: dict[str, str], connections: int, *, llm: LlmServer, seconds: float
) -> dict[str, Any]:
    """One agent turn against each hostile model server, which stops sending after `seconds` (so
    that a server with no bound of its own on them ends the turn too): its time to end, and the
    app's memory after."""
    client = Client(server.port, timeout=300)
    client.login("bob", PASSWORD)
    item = client.request("POST", "/a/notebook/items", {"title": "model"}).json()["id"]
    results = {}
    for name, hostile in (
        ("endless_line", Endless("line")),
        ("endless_chunks", Endless("chunks")),
        ("gigabyte_body", Endless("body")),
    ):
        llm.reset()
        llm.push(hostile)
        rss_before, _threads = _rss_and_threads(server)
        started = time.perf_counter()
        sent = client.request("POST", f"/a/notebook/items/{item}/messages", {"content": "hello"})
        seconds = time.perf_counter() - started
        rss_after, _threads = _rss_and_threads(server)
        replies = sent.json().get("replies", []) if sent.status == 201 else []
        results[name] = {
            "status": sent.status,
            "turn_seconds": round(seconds, 2),
            "rss_growth_mb": round((rss_after - rss_before) / 1024 / 1024, 1),
            "reply_end": (replies[-1]["content"][-90:] if replies else sent.body[:200].decode(errors="replace")),
        }
    llm.reset()
    return results


SCENARIOS: dict[str, Callable[..., dict[str, Any]]] = {
    "trickled_headers": trickled_headers,
    "idle_streams": idle_streams,
    "long_commands": long_commands,
    "hostile_model": hostile_model,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--connections", type=int, default=500)
    parser.add_argument("--database-url", default=DEFAULT_SERVER_URL)
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), default=sorted(SCENARIOS))
    parser.add_argument("--hostile-seconds", type=float, default=90, help="how long a hostile model server sends")
    args = parser.parse_args()
    llm = LlmServer().start()
    # No per-person bound on commands (one person opens every idle stream), none per process either;
    # the model on the hostile test server, with the default bounds and a 60 s deadline.
    settings = {
        "WORKSPACE_EXEC_CONCURRENCY_PER_USER": "0",
        "WORKSPACE_RUNNING_COMMANDS_PER_PROCESS": "0",
        "WORKSPACE_LLM_BASE_URL": llm.base_url,
        "WORKSPACE_LLM_MODEL": "test-model",
        "WORKSPACE_LLM_TIMEOUT": "60",
    }
    try:
        for name in args.only:
            with (
                throwaway_database(args.database_url, prefix="ws_bench_connections") as url,
                _serving(args.repo, url, args.workers, **settings) as (server, env),
            ):
                extra = {"llm": llm, "seconds": args.hostile_seconds} if name == "hostile_model" else {}
                figures = SCENARIOS[name](server, env, args.connections, **extra)
            print(
                json.dumps({"scenario": name, "repo": str(args.repo), "workers": args.workers, **figures}), flush=True
            )
    finally:
        llm.stop()


if __name__ == "__main__":
    main()

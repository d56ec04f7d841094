"""Fuzzes the live API with schemathesis: no 5xx, every response as the schema says (issue 8.2).

    .venv/bin/python tests/ops/fuzz.py [--max-examples N] [--seed S]

Starts the service on 127.0.0.1 (a free port, loopback only) over a throwaway database: a temp
SQLite file, or, when DATABASE_URL names PostgreSQL, a fresh database beside the one it names
(dropped afterwards). Identity is the mock directory's staff user via `X-User-Id`; the demo data
is loaded so that some generated ids name real objects. Exits with schemathesis's status.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
USER = "alice"  # staff in the mock directory, so the admin endpoints answer too
KNOWN_PROBABILITY = 0.7
CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def _throwaway_database(tmp: Path):
    """Yields a DATABASE_URL nobody else uses."""
    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith(("postgres://", "postgresql://")):
        yield f"sqlite:///{tmp / 'fuzz.sqlite3'}"
        return
    import psycopg

    parts = urlsplit(base)
    name = f"{parts.path.lstrip('/') or 'workspace'}_fuzz_{os.getpid()}"
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _wait_until_up(url: str, server: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode} before it answered")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"the server did not answer {url} within {timeout}s")


def _get(base: str, path: str) -> object:
    request = urllib.request.Request(f"{base}{path}", headers={"X-User-Id": USER, "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _known_values(base: str) -> dict[str, list]:
    """Ids of the demo's objects, so that path parameters often name something real (not only 404s)."""
    items = _get(base, "/a/notebook/items")["results"]
    collections = _get(base, "/kb/collections")
    workflows = _get(base, "/api/v1/workflow/meta")["items"]
    documents = [doc for col in collections for doc in _get(base, f"/kb/collections/{col['id']}/documents")]
    return {
        "slug": ["notebook", "rca"],
        "item_id": [item["id"] for item in items] + [inv["id"] for inv in _get(base, "/investigations")],
        "investigation_id": [inv["id"] for inv in _get(base, "/investigations")],
        "collection_id": [col["id"] for col in collections],
        "document_id": [doc["id"] for doc in documents],
        "chat_id": [chat["id"] for chat in _get(base, "/kb/chats")],
        "resource_id": [wf["resource_id"] for wf in workflows],
        "workflow_id": [wf["resource_id"] for wf in workflows],
        "revision_id": [wf["current_revision_id"] for wf in workflows],
        "notification_id": [1, 2, 3],
        "user_id": ["alice", "bob", "carol", "dave"],
        "file_path": ["README.md", "explore.py", "notes/new.txt"],
    }


def _write_config(path: Path, values: dict[str, list]) -> None:
    """schemathesis.toml: each path parameter draws from the known values most of the time."""
    lines = []
    for name, known in values.items():
        if known:
            lines += [f"[dictionaries.{name}]", f"values = {json.dumps(known)}", ""]
    lines.append("[parameters]")
    for name, known in values.items():
        if known:
            lines.append(f'"path.{name}" = {{ dictionary = "{name}", probability = {KNOWN_PROBABILITY} }}')
    path.write_text("\n".join(lines) + "\n")


def _print_server_errors(log_path: Path) -> None:
    """The server's tracebacks and 5xx lines (timestamped 4xx warnings left out) beside the curl lines."""
    lines = log_path.read_text(errors="replace").splitlines()
    wanted = [
        line for line in lines if '"status": 5' in line or " ERROR " in line or not line.startswith(("{", '"', "20"))
    ]
    sys.stdout.write("---- server log (errors and tracebacks) ----\n" + "\n".join(wanted[-200:]) + "\n")


def _manage(*args: str, env: dict[str, str]) -> None:
    subprocess.run([str(BIN / "python"), "manage.py", *args], cwd=ROOT, env=env, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=20)
    parser.add_argument("--seed", type=int, default=8)
    # One worker: with two, hypothesis describes filter lambdas with `ast.parse` on both threads at
    # once, and CPython 3.11's AST recursion counter is not thread-safe ("AST constructor recursion
    # depth mismatch", a crash of the fuzzer, not a finding about the API).
    parser.add_argument("--workers", default="1")
    parser.add_argument("extra", nargs="*", help="more schemathesis options (after --)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ws-fuzz-") as tmp_name, _throwaway_database(Path(tmp_name)) as db_url:
        tmp = Path(tmp_name)
        # Sandbox uids reach their workspaces by path (bubblewrap runs as them).
        tmp.chmod(0o711)
        env = {
            **os.environ,
            "DATABASE_URL": db_url,
            "DJANGO_DEBUG": "0",
            "DJANGO_SECRET_KEY": "fuzz-only-secret",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "WORKSPACE_MOCK_IDENTITY": "1",
            "WORKSPACE_ALLOW_MOCK_IDENTITY": "1",
            "WORKSPACE_VAR_DIR": str(tmp / "var"),
            "WORKSPACE_LOG_LEVEL": "WARNING",
        }
        _manage("migrate", "--noinput", "-v", "0", env=env)
        _manage("load_demo", env=env)
        log_path = tmp / "server.log"
        server_log = log_path.open("w")
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        # The stack every app process runs (workspace/gunicorn.conf.py: a uvicorn worker over
        # workspace/serving.py), with the worker beside it started here.
        server = subprocess.Popen(
            [
                str(BIN / "gunicorn"), "-c", "workspace/gunicorn.conf.py",
                "--bind", f"127.0.0.1:{port}", "--workers", "1",
            ],
            cwd=ROOT,
            env={**env, "WORKSPACE_SERVE_PREPARE": "0", "WORKSPACE_SERVE_WORKER": "0"},
            stdout=server_log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        # The worker beside the server, as `make run` starts it: /healthz reports its heartbeat.
        worker = subprocess.Popen(
            [str(BIN / "python"), "manage.py", "worker"], cwd=ROOT, env=env, stdout=server_log, stderr=subprocess.STDOUT
        )
        try:
            _wait_until_up(f"{base}/healthz", server)
            config = tmp / "schemathesis.toml"
            _write_config(config, _known_values(base))
            started = time.monotonic()
            command = [
                str(BIN / "schemathesis"),
                "--config-file",
                str(config),
                "run",
                f"{base}/api/schema",
                "--checks",
                ",".join(CHECKS),
                "--header",
                f"X-User-Id: {USER}",
                "--max-examples",
                str(options.max_examples),
                "--seed",
                str(options.seed),
                "--workers",
                options.workers,
                "--generation-database",
                "none",
                "--request-timeout",
                "60",
                # A kept-alive connection the server closed as idle between requests is not the API's answer.
                "--request-retries",
                "2",
                "--no-color",
                *options.extra,
            ]
            result = subprocess.run(command, cwd=tmp, env=env, check=False)
            if result.returncode:
                _print_server_errors(log_path)
            engine = db_url.split(":", 1)[0]
            sys.stdout.write(f"fuzz: {engine}, {time.monotonic() - started:.0f}s, exit {result.returncode}\n")
            return result.returncode
        finally:
            for process in (server, worker):
                process.terminate()
                process.wait(timeout=20)
            server_log.close()
            _manage("release_sandboxes", env=env)


if __name__ == "__main__":
    sys.exit(main())

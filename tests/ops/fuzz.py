"""Fuzzes the live API with schemathesis: no 5xx, every response as the schema says (issue 8.2).

    .venv/bin/python tests/ops/fuzz.py [--max-examples N] [--seed S] [--acceptance] [--production]

Starts the service on 127.0.0.1 (a free port, loopback only) over a throwaway database: a temp
SQLite file, or, when DATABASE_URL names PostgreSQL, a fresh database beside the one it names
(dropped afterwards). Identity is the mock directory's staff user via `X-User-Id`; the demo data
is loaded so that some generated ids name real objects. Exits with schemathesis's status.
`--production` runs the service as `make serve` does (no mock identity) and acts with a personal
API token, checking that a request without it is refused (`ignored_auth`).
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
# A schema-valid request may still be refused for the state it meets, which no document can say:
# 410 (the resource was deleted meanwhile) and 412 (`If-Match` names a revision that is not the
# current one). positive_data_acceptance takes these besides its defaults; everything else the
# server refuses is in the document, so a 400 or 422 for a valid request is still a failure.
STATE_STATUSES = ["2xx", "3xx", "401", "403", "404", "409", "410", "412", "429"]
# Operations whose body names other things by what the document can only call a string: a user,
# a collection, an item, a place in the workspace (a file or a folder, which one it is), a place
# in a workflow's data (a JSON Patch path), a file's type (its name decides). Whether that exists
# is state; the refusal (its own error code) is taken as a valid request's answer there only.
_NAMES_USERS = "400"
STATE_REFUSALS: dict[str, list[str]] = {
    "POST /a/{slug}/items": [_NAMES_USERS],
    "PATCH /a/{slug}/items/{item_id}": [_NAMES_USERS],
    "POST /investigations": [_NAMES_USERS],
    "POST /investigations/{investigation_id}/members": [_NAMES_USERS],
    "POST /investigations/{investigation_id}/mentions": [_NAMES_USERS],
    "POST /investigations/{investigation_id}/status": ["400"],  # already in that status
    "POST /kb/chats": ["400"],  # collections
    "POST /kb/chats/{chat_id}/share": [_NAMES_USERS],
    "POST /kb/collections/{collection_id}/writers": [_NAMES_USERS],
    "POST /kb/collections/{collection_id}/documents": ["415"],
    "POST /api/v1/workflow": ["400"],  # item_id
    "PUT /api/v1/workflow/{resource_id}": ["400"],
    "PATCH /api/v1/workflow/{resource_id}": ["400", "422"],
}
# Every workspace file operation: the paths name files and folders that may or may not be there.
WORKSPACE_PATHS = "^/a/\\{slug\\}/items/\\{item_id\\}/files"
NEGATIVE_STATUSES = ["400", "401", "403", "404", "405", "406", "409", "410", "412", "413", "415", "422", "428", "429"]
CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
]
# `--acceptance` (CI): also a valid request is taken and an invalid one refused (issue 46.1), so
# every rule the server enforces is in the document and nothing it forbids is accepted.
ACCEPTANCE_CHECKS = ["positive_data_acceptance", "negative_data_rejection"]


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


def _read(base: str, path: str, identity: dict[str, str]) -> object:
    request = urllib.request.Request(f"{base}{path}", headers={**identity, "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _known_values(base: str, identity: dict[str, str]) -> dict[str, list]:
    """Ids of the demo's objects, so that path parameters often name something real (not only 404s)."""

    def _get(base: str, path: str) -> object:
        return _read(base, path, identity)

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
    lines = ["[checks.positive_data_acceptance]", f"expected-statuses = {json.dumps(STATE_STATUSES)}", ""]
    # An invalid body sent with a stale If-Match, or to a deleted resource, meets the precondition
    # first (RFC 9110 evaluates preconditions before the method).
    lines += ["[checks.negative_data_rejection]", f"expected-statuses = {json.dumps(NEGATIVE_STATUSES)}", ""]
    for name, extra in STATE_REFUSALS.items():
        lines += ["[[operations]]", f"include-name = {json.dumps(name)}"]
        lines += [f"checks.positive_data_acceptance.expected-statuses = {json.dumps(STATE_STATUSES + extra)}", ""]
    lines += ["[[operations]]", f"include-path-regex = {json.dumps(WORKSPACE_PATHS)}"]
    lines += [f"checks.positive_data_acceptance.expected-statuses = {json.dumps([*STATE_STATUSES, '400'])}", ""]
    for name, known in values.items():
        if known:
            # Strings: every path parameter is one in the document (ids by their pattern).
            lines += [f"[dictionaries.{name}]", f"values = {json.dumps([str(value) for value in known])}", ""]
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


def _issue_token(env: dict[str, str]) -> str:
    """A personal API token of the demo's staff user, as its tokens page would issue one."""
    code = (
        "from collab.actor import Actor; from collab.tokens import token_create; "
        f"print(token_create(actor=Actor({USER!r}, True), name='fuzz').token)"
    )
    run = subprocess.run(
        [str(BIN / "python"), "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return run.stdout.strip().splitlines()[-1]


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
    parser.add_argument("--acceptance", action="store_true", help="also " + " and ".join(ACCEPTANCE_CHECKS))
    parser.add_argument(
        "--production",
        action="store_true",
        help="as `make serve` runs: no mock identity, a personal API token (also checks ignored_auth)",
    )
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
            # Production (`make serve`): accounts and tokens, no X-User-Id, no default person.
            "WORKSPACE_MOCK_IDENTITY": "0" if options.production else "1",
            "WORKSPACE_ALLOW_MOCK_IDENTITY": "0" if options.production else "1",
            # ignored_auth sends wrong passwords: the lockout after a few (tests/collab cover it)
            # would turn every later answer from loopback into a 429.
            "WORKSPACE_LOGIN_FAILURE_LIMIT": "1000000",
            "WORKSPACE_VAR_DIR": str(tmp / "var"),
            "WORKSPACE_LOG_LEVEL": "WARNING",
        }
        _manage("migrate", "--noinput", "-v", "0", env=env)
        # A throwaway database on loopback: the demo's known passwords reach nobody.
        _manage("load_demo", *(["--with-real-accounts"] if options.production else []), env=env)
        identity = {"Authorization": f"Bearer {_issue_token(env)}"} if options.production else {"X-User-Id": USER}
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
            _write_config(config, _known_values(base, identity))
            started = time.monotonic()
            checks = CHECKS + (ACCEPTANCE_CHECKS if options.acceptance else [])
            checks += ["ignored_auth"] if options.production else []
            # Revoking tokens would revoke the one this run acts with (its id is a small number the
            # generator tries); the demo run fuzzes that operation.
            excluded = ["--exclude-name", "DELETE /me/tokens/{token_id}"] if options.production else []
            command = [
                str(BIN / "schemathesis"),
                "--config-file",
                str(config),
                "run",
                f"{base}/api/schema",
                "--checks",
                ",".join(checks),
                *(option for name, value in identity.items() for option in ("--header", f"{name}: {value}")),
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
                *excluded,
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

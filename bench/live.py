"""A live multi-process service for the load test and tests/production: a throwaway PostgreSQL
database, gunicorn started with workspace/gunicorn.conf.py on a free loopback port, Django code run
in a subprocess against the same database, and a stdlib HTTP client (keep-alive, cookies, session
login, HTTP Basic). Only the standard library and psycopg; no new dependencies.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
PRODUCTION_CONFIG = REPO / "workspace" / "gunicorn.conf.py"
DEFAULT_SERVER_URL = "postgres://postgres@127.0.0.1:5432/postgres"


def postgres_reachable(url: str = DEFAULT_SERVER_URL) -> bool:
    try:
        import psycopg

        with psycopg.connect(_admin_url(url), connect_timeout=3):
            return True
    except Exception:
        return False


def _admin_url(url: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/postgres"))


@contextlib.contextmanager
def throwaway_database(server_url: str = DEFAULT_SERVER_URL, prefix: str = "ws_live") -> Iterator[str]:
    """A fresh, empty PostgreSQL database; dropped (even with open connections) afterwards."""
    import psycopg

    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = _admin_url(server_url)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


MIGRATIONS_GLOB = "*/**/migrations/*.py"


def _migrations_digest() -> str:
    """What the schema is made of: every migration file of the checkout, by path and content."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(REPO.glob(MIGRATIONS_GLOB)):
        if ".venv" not in path.parts:
            digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def migrated_database(server_url: str = DEFAULT_SERVER_URL, prefix: str = "ws_live") -> Iterator[str]:
    """A fresh PostgreSQL database with every migration applied, copied from a template database
    that the first caller migrates once per set of migration files (`ws_template_<digest>`, kept on
    the server for the next run). A copy costs a fraction of a second where a migrate costs a
    Django process and seconds of CPU. Templates of other migrations are dropped when a new one is made."""
    import psycopg

    template = f"ws_template_{_migrations_digest()}"
    admin = _admin_url(server_url)
    with psycopg.connect(admin, autocommit=True) as connection:
        # One maker at a time across processes (CI's lanes, a bench beside them).
        connection.execute("SELECT pg_advisory_lock(hashtext('ws_template'))")
        try:
            exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (template,)).fetchone()
            if exists is None:
                _make_template(connection, server_url, template)
        finally:
            connection.execute("SELECT pg_advisory_unlock(hashtext('ws_template'))")
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    _copy_database(admin, template, name)
    try:
        yield urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _make_template(connection: Any, server_url: str, template: str) -> None:
    import tempfile

    from psycopg.errors import ObjectInUse

    building = f"{template}_building"
    connection.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
    connection.execute(f'CREATE DATABASE "{building}"')
    with tempfile.TemporaryDirectory(prefix="ws-template-") as var_dir:
        migrate(production_env(urlunsplit(urlsplit(server_url)._replace(path=f"/{building}")), Path(var_dir)))
    # Published under its name only once whole: a maker killed halfway leaves no template to copy.
    connection.execute(f'ALTER DATABASE "{building}" RENAME TO "{template}"')
    stale = connection.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE 'ws\\_template\\_%%' AND datname <> %s", (template,)
    ).fetchall()
    for (old,) in stale:
        # A run of another checkout may be copying it this moment; it goes next time then.
        with contextlib.suppress(ObjectInUse):
            connection.execute(f'DROP DATABASE IF EXISTS "{old}"')


def _copy_database(admin: str, template: str, name: str) -> None:
    import psycopg
    from psycopg.errors import ObjectInUse

    # PostgreSQL refuses a copy while another session is in the template; only a maker ever is.
    for attempt in range(50):
        try:
            with psycopg.connect(admin, autocommit=True) as connection:
                connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            return
        except ObjectInUse:
            if attempt == 49:
                raise
            time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def production_env(database_url: str, var_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of `make serve`: DEBUG off, Django accounts, PostgreSQL, a private var dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "WORKSPACE_", "PYTEST"))}
    env.update(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="workspace.settings",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="live-" + uuid.uuid4().hex,
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        WORKSPACE_MOCK_IDENTITY="0",
        WORKSPACE_VAR_DIR=str(var_dir),
        WORKSPACE_LOG_LEVEL="WARNING",
    )
    env.update(extra)
    return env


def run_django(code: str, env: dict[str, str], *args: str, timeout: float = 120) -> str:
    """Runs `code` after django.setup() in a fresh interpreter; returns its stdout."""
    script = "import django\ndjango.setup()\n" + code
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"django subprocess failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def query(env: dict[str, str], sql: str, *params: object) -> list[tuple]:
    """The rows of one SQL statement on the deployment's database (its DATABASE_URL, PostgreSQL or
    SQLite), straight from the driver: what a test polls or sets, since a Django process per look
    costs a second of CPU. Placeholders are `%s` on both; a statement without rows gives []."""
    url = env["DATABASE_URL"]
    if url.startswith("sqlite:"):
        import sqlite3

        # dj-database-url's form: `sqlite:///` then the path (`sqlite:////tmp/x` is /tmp/x).
        connection = sqlite3.connect(url.split("sqlite:///", 1)[1], timeout=30)
        try:
            with connection:  # commits a write
                return connection.execute(sql.replace("%s", "?"), params).fetchall()
        finally:
            connection.close()
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        cursor = connection.execute(sql, params)
        return cursor.fetchall() if cursor.description is not None else []


def migrate(env: dict[str, str]) -> None:
    run_django("from django.core.management import call_command\ncall_command('migrate', verbosity=0)\n", env)


CLOSE_SANDBOXES = """
from django.core.management import call_command
call_command("release_sandboxes")
"""


def close_sandboxes(env: dict[str, str]) -> None:
    """Closes every local sandbox under the env's var dir and unmounts its workspace images."""
    run_django(CLOSE_SANDBOXES, env)


@dataclass
class Server:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def client(self, **kwargs: Any) -> Client:
        return Client(self.port, **kwargs)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@contextlib.contextmanager
def gunicorn(
    env: dict[str, str],
    log: Path,
    *,
    workers: int,
    config: Path = PRODUCTION_CONFIG,
    startup: float = 60,
    python: str = sys.executable,
    cwd: Path = REPO,
) -> Iterator[Server]:
    """gunicorn with `config` on a free loopback port; stopped (SIGTERM, then SIGKILL) on exit.
    `python` and `cwd` serve another checkout (a bench's figure "before")."""
    port = free_port()
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                python,
                "-m",
                "gunicorn",
                "-c",
                str(config),
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(workers),
            ],
            cwd=cwd,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(port, process, log)
    try:
        _wait_until_up(server, startup)
        yield server
    finally:
        stop(process)


def _wait_until_up(server: Server, startup: float) -> None:
    deadline = time.monotonic() + startup
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {server.process.returncode}:\n{server.log_text()}")
        with contextlib.suppress(OSError, http.client.HTTPException):
            if server.client().get("/me").status in (200, 401):
                return
        time.sleep(0.1)
    raise RuntimeError(f"gunicorn did not answer within {startup} s:\n{server.log_text()}")


def stop(process: subprocess.Popen[bytes], grace: float = 20) -> None:
    """SIGTERM to the process we started, then SIGKILL to its own process group if it lingers."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_for(condition: Callable[[], bool], what: str, *, seconds: float, poll: float = 0.2) -> None:
    """Polls `condition` until it holds; AssertionError naming `what` after `seconds` (a bound to
    give up at on a loaded machine, never a speed anyone asserts)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(poll)
    raise AssertionError(f"gave up waiting for {what}")


def children_of(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    """One keep-alive connection (use one client per thread) with cookies, CSRF and HTTP Basic."""

    def __init__(self, port: int, *, basic: tuple[str, str] | None = None, timeout: float = 60) -> None:
        self.port = port
        self.timeout = timeout
        self.cookies: dict[str, str] = {}
        self.default_headers: dict[str, str] = {"Accept": "application/json"}
        if basic:
            token = base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode()
            self.default_headers["Authorization"] = f"Basic {token}"
        self._connection: http.client.HTTPConnection | None = None

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, *, raw: bool = False
    ) -> Response:
        sent = dict(self.default_headers)
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
            if "csrftoken" in self.cookies:
                sent["X-CSRFToken"] = self.cookies["csrftoken"]
        payload: bytes | None = None
        if body is not None:
            payload = body if raw else json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/octet-stream" if raw else "application/json")
        sent.update(headers or {})
        for attempt in (1, 2):
            connection = self._connection or http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            self._connection = connection
            try:
                connection.request(method, path, body=payload, headers=sent)
                reply = connection.getresponse()
                data = reply.read()
            except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
                # The server closed an idle keep-alive connection: reconnect once.
                connection.close()
                self._connection = None
                if attempt == 2:
                    raise
                continue
            received = {k.lower(): v for k, v in reply.getheaders()}
            for cookie in reply.headers.get_all("Set-Cookie") or []:
                name, _, rest = cookie.partition("=")
                self.cookies[name.strip()] = rest.split(";", 1)[0]
            if reply.will_close:
                connection.close()
                self._connection = None
            return Response(reply.status, received, data)
        raise AssertionError("unreachable")

    def get(self, path: str, **kwargs: Any) -> Response:
        return self.request("GET", path, **kwargs)

    def login(self, username: str, password: str) -> None:
        """Django's login form, as a browser does: afterwards requests carry the session and CSRF token."""
        page = self.get("/accounts/login/", headers={"Accept": "text/html"})
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.body)
        if token is None:
            raise RuntimeError(f"no login form: {page.status}")
        form = urlencode({"username": username, "password": password, "csrfmiddlewaretoken": token.group(1).decode()})
        done = self.request(
            "POST",
            "/accounts/login/",
            form.encode(),
            {"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/html"},
            raw=True,
        )
        if done.status != 302 or "sessionid" not in self.cookies:
            raise RuntimeError(f"login of {username} failed: {done.status}")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

"""Gunicorn configuration of every app process (`make serve`, `make run`): uvicorn workers serving the
ASGI app (workspace/asgi.py, workspace/serving.py, workspace/uvicorn_worker.py), the periodic worker
beside them.

    .venv/bin/gunicorn -c workspace/gunicorn.conf.py

Before the first worker forks, the master (`on_starting`) creates the database named by
DATABASE_URL if it is missing, migrates it and collects static files (WhiteNoise serves them);
once the port is bound (`when_ready`) it starts `manage.py worker` and stops it when gunicorn
exits, so one Ctrl-C stops both.

Environment (all optional):
    WORKSPACE_BIND           host:port to listen on (default 127.0.0.1:8000)
    WEB_CONCURRENCY          worker processes (default 2 x cores + 1, at most 8); each serves every
                             connection on one event loop, with WORKSPACE_REQUEST_THREADS threads
                             for requests' sync work and WORKSPACE_LONG_WORK_THREADS for model turns
    WORKSPACE_SERVE_PREPARE  0: skip create-database / migrate / collectstatic (another process does it)
    WORKSPACE_SERVE_WORKER   0: do not start `manage.py worker` here (it runs elsewhere; several are safe)
    WORKSPACE_WORKER_INTERVAL seconds between the worker's passes (default 30)
    WORKSPACE_SERVE_RELEASE_SANDBOXES  1: on exit, close this machine's sandboxes too
                             (`manage.py release_sandboxes`), as `make run` does so that its Ctrl-C
                             leaves nothing running; production leaves it off, and its sandboxes
                             outlive a restart of the app processes
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

BASE_DIR = Path(__file__).resolve().parent.parent
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/workspace"


def _flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "")
    return default if raw == "" else raw.strip().lower() in {"1", "true", "yes", "on"}


def _var_dir() -> Path:
    return Path(os.environ.get("WORKSPACE_VAR_DIR", str(BASE_DIR / "var")))


def ensure_secret_key() -> None:
    """DJANGO_SECRET_KEY from the environment, else the one generated once into var/secret_key."""
    if os.environ.get("DJANGO_SECRET_KEY"):
        return
    path = _var_dir() / "secret_key"
    if not path.exists() or not path.read_text().strip():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(50) + "\n")
        sys.stderr.write(
            f"serve: DJANGO_SECRET_KEY is not set; generated one into {path} (kept for later runs). "
            "Set DJANGO_SECRET_KEY to the same value on every app process behind one load balancer.\n"
        )
    os.environ["DJANGO_SECRET_KEY"] = path.read_text().strip()


def ensure_database(url: str) -> None:
    """Creates the PostgreSQL database of `url` when it does not exist yet (SQLite creates itself)."""
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql", "pgsql"}:
        return
    import psycopg

    name = parts.path.lstrip("/")
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{name}"')
            sys.stderr.write(f"serve: created the database {name}\n")


def _manage(*args: str) -> None:
    subprocess.run([sys.executable, str(BASE_DIR / "manage.py"), *args], check=True, cwd=BASE_DIR)


# Module level runs in the master before it forks, so every worker inherits these. Production (DEBUG
# off) runs on PostgreSQL with a secret key of its own; the demo (`make run`, DEBUG on) on SQLite.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workspace.settings")
if not _flag("DJANGO_DEBUG", True):
    os.environ.setdefault("DATABASE_URL", DEFAULT_DATABASE_URL)
    ensure_secret_key()

wsgi_app = "workspace.asgi:application"
chdir = str(BASE_DIR)
bind = [os.environ.get("WORKSPACE_BIND", "127.0.0.1:8000")]
workers = int(os.environ.get("WEB_CONCURRENCY") or min(2 * (os.cpu_count() or 1) + 1, 8))
# uvicorn on an event loop, with deadlines on slow clients and a drain on shutdown (workspace/uvicorn_worker.py).
worker_class = "workspace.uvicorn_worker.WorkspaceUvicornWorker"
# A worker whose loop does not answer gunicorn's heartbeat for this long is restarted; nothing a
# client or a command does blocks the loop.
timeout = 30
# gunicorn's own wait for a worker to stop; the worker itself waits at most WORKSPACE_SHUTDOWN_SECONDS.
graceful_timeout = int(os.environ.get("WORKSPACE_SHUTDOWN_SECONDS", "30")) + 5
# Request logs are the application's (structured, with the user id); gunicorn logs its own events.
accesslog = None
errorlog = "-"
# No shared runtime control socket: two servers on one machine (tests, benchmarks) would collide.
control_socket_disable = True

_worker_process: subprocess.Popen[bytes] | None = None


def on_starting(server: Any) -> None:
    if _flag("WORKSPACE_SERVE_PREPARE", True):
        ensure_database(os.environ["DATABASE_URL"])
        _manage("migrate", "--noinput")
        _manage("collectstatic", "--noinput", "--verbosity", "0")


def when_ready(server: Any) -> None:
    """The listening socket is bound (a taken port has already stopped the master): start the worker."""
    global _worker_process
    if _flag("WORKSPACE_SERVE_WORKER", True):
        interval = os.environ.get("WORKSPACE_WORKER_INTERVAL", "30")
        _worker_process = subprocess.Popen(
            [sys.executable, str(BASE_DIR / "manage.py"), "worker", "--interval", interval], cwd=BASE_DIR
        )
        server.log.info("Started manage.py worker (pid %s)", _worker_process.pid)


def on_exit(server: Any) -> None:
    _stop_worker(server)
    if _flag("WORKSPACE_SERVE_RELEASE_SANDBOXES", False):
        # After the worker, which would otherwise probe the sandboxes being closed.
        try:
            _manage("release_sandboxes")
        except subprocess.CalledProcessError as error:
            server.log.error(
                "Closing the sandboxes failed (exit %s): run `manage.py release_sandboxes`", error.returncode
            )


def _stop_worker(server: Any) -> None:
    if _worker_process is None or _worker_process.poll() is not None:
        return
    _worker_process.terminate()
    try:
        _worker_process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        _worker_process.kill()
        _worker_process.wait()
    server.log.info("Stopped manage.py worker (pid %s)", _worker_process.pid)

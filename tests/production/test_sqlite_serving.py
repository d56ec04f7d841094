"""SQLite as the embedded default under the documented deployment: gunicorn with threads, each
keeping its connection (DATABASE_CONN_MAX_AGE), and another process writing beside it. Writers
queue for the write lock (BEGIN IMMEDIATE, a busy timeout) instead of failing with "database is
locked". Needs no PostgreSQL: the database is a SQLite file of its own."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bench.live import REPO, Client, gunicorn, migrate, production_env, run_django

THREADS = 4
ROUNDS = 15
BESIDE_WRITES = 150

ACCOUNT = """
from django.contrib.auth.models import User
from collab.actor import Actor
from collab.tokens import token_create
User.objects.create_user("sam", password="sam-secret-1")
print(token_create(actor=Actor("sam"), name="writer").token)
"""

# The worker beside gunicorn, as far as the database sees it: another process writing in
# transactions of its own, through the same services, while the server answers writes.
BESIDE = f"""
import django
django.setup()
from django.db import transaction
from collab.services import notify
for n in range({BESIDE_WRITES}):
    with transaction.atomic():
        notify(["sam"], "mention", f"written beside the server {{n}}")
print("done")
"""


@pytest.fixture
def sqlite_deployment(tmp_path: Path) -> dict[str, str]:
    env = production_env(
        f"sqlite:///{tmp_path / 'service.sqlite3'}",
        tmp_path / "var",
        WORKSPACE_SERVE_PREPARE="0",
        WORKSPACE_SERVE_WORKER="0",
        WORKSPACE_REQUEST_THREADS=str(THREADS),
    )
    migrate(env)
    return env


def test_writers_on_sqlite_queue_for_the_lock_instead_of_failing(sqlite_deployment, tmp_path):
    # Given gunicorn with several threads on a SQLite file, a script's token, and another process
    # writing to the same file all along
    env = sqlite_deployment
    token = run_django(ACCOUNT, env).split()[-1]
    with gunicorn(env, tmp_path / "gunicorn.log", workers=1) as server:
        beside = subprocess.Popen(
            [sys.executable, "-c", BESIDE], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        answers: list[int] = []
        lock = threading.Lock()

        def write() -> None:
            client = Client(server.port)
            client.default_headers["Authorization"] = f"Bearer {token}"
            for n in range(ROUNDS):
                name = f"c{threading.get_ident()}-{n}"
                created = client.request("POST", "/kb/collections", {"name": name})
                renamed = (
                    client.request(
                        "PATCH", f"/kb/collections/{created.json()['id']}", {"name": name + "-renamed"}
                    ).status
                    if created.status == 201
                    else None
                )
                read = client.request("POST", "/notifications/read-all").status
                with lock:
                    answers.extend(s for s in (created.status, renamed, read) if s is not None)
            client.close()

        # When several threads write through the server at once, beside the other process
        threads = [threading.Thread(target=write) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        out, err = beside.communicate(timeout=120)
        log = server.log_text()

    # Then every write was answered with success, none with "database is locked"
    assert sorted(set(answers)) == [200, 201], answers
    assert len(answers) == THREADS * ROUNDS * 3
    assert beside.returncode == 0, err.decode()
    assert b"done" in out
    assert "database is locked" not in log
    counted = run_django(
        "from collab.models import Notification\nfrom knowledge.models import Collection\n"
        "print(Collection.objects.filter(name__endswith='-renamed').count(), Notification.objects.count())",
        env,
    ).split()
    assert counted == [str(THREADS * ROUNDS), str(BESIDE_WRITES)]

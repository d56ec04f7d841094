"""`manage.py worker` as a real process: it outlives a database outage, stops on SIGTERM, and runs what is queued."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench.live import REPO, run_django

# A deadline for polling a subprocess, never an assertion about speed.
DEADLINE_SECONDS = 60

QUEUE_AN_UPLOAD = """
from knowledge import services
collection = services.collection_create(user_id="alice", name="Handbook")
document = services.document_upload(
    collection_id=collection.id, user_id="alice", filename="notes.txt", content_type="text/plain",
    data=b"Quotas are per person.",
)
print(document.id)
"""

DOCUMENT_STATUS = """
import sys
from knowledge.models import Document
from workspace.models import WorkerBeat
print(Document.objects.get(pk=sys.argv[1]).status, WorkerBeat.objects.count())
"""


@pytest.fixture
def worker_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "PYTEST"))}
    env.update(
        DJANGO_SETTINGS_MODULE="workspace.settings",
        WORKSPACE_VAR_DIR=str(tmp_path / "var"),
        WORKSPACE_WORKER_HEARTBEAT_SECONDS="0.2",
    )
    return env


@pytest.fixture
def worker_log(tmp_path: Path) -> Path:
    return tmp_path / "worker.log"


@pytest.fixture
def start_worker(worker_log: Path) -> Iterator[Callable[[dict[str, str]], subprocess.Popen[bytes]]]:
    """Starts `manage.py worker --interval 1` with an environment; kills what is left at the end."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(env: dict[str, str]) -> subprocess.Popen[bytes]:
        with worker_log.open("wb") as sink:
            process = subprocess.Popen(
                [sys.executable, "manage.py", "worker", "--interval", "1"],
                cwd=REPO,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"gave up waiting for {what}")


def test_the_worker_outlives_a_database_that_is_down_and_stops_on_sigterm(worker_env, start_worker, worker_log):
    # Given a database nobody answers for
    env = {**worker_env, "DATABASE_URL": "postgres://postgres@127.0.0.1:1/nothing"}

    # When the worker runs against it for a few passes
    process = start_worker(env)
    _wait_for(lambda: worker_log.read_text().count("still failing") >= 2, "repeated failed passes")

    # Then it is still running, said so once with a traceback, and a SIGTERM stops it cleanly
    assert process.poll() is None
    assert worker_log.read_text().count("a pass failed; trying again") == 1
    process.send_signal(signal.SIGTERM)
    assert process.wait(DEADLINE_SECONDS) == 0


def test_the_running_worker_ingests_a_queued_upload_and_beats(worker_env, start_worker, tmp_path):
    # Given a migrated database with an upload whose ingest is queued
    env = {**worker_env, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    run_django("from django.core.management import call_command\ncall_command('migrate', verbosity=0)\n", env)
    document_id = run_django(QUEUE_AN_UPLOAD, env).strip()

    # When the worker runs
    process = start_worker(env)

    # Then the document becomes ready while the worker's heartbeat is on record
    _wait_for(lambda: run_django(DOCUMENT_STATUS, env, document_id).split() == ["ready", "1"], "the ingest")
    # And after SIGTERM its heartbeat is gone, so nobody mistakes it for a live worker
    process.send_signal(signal.SIGTERM)
    assert process.wait(DEADLINE_SECONDS) == 0
    assert run_django(DOCUMENT_STATUS, env, document_id).split() == ["ready", "0"]

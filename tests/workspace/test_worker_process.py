"""`manage.py worker` as a real process: it outlives a database outage, stops on SIGTERM, and runs what is queued."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.live import close_sandboxes, query, run_django, wait_for

# A deadline for polling a subprocess, never an assertion about speed.
DEADLINE_SECONDS = 60

QUEUE_AN_UPLOAD = """
from collab.actor import Actor
from knowledge import services
collection = services.collection_create(actor=Actor("alice"), name="Handbook")
document = services.document_upload(
    collection_id=collection.id, actor=Actor("alice"), filename="notes.txt", content_type="text/plain",
    data=b"Quotas are per person.",
)
print(document.id)
"""

# What the tests wait for, read straight from the database: a Django process per look costs a second
# of CPU, and these are polled.
DOCUMENT_STATUS = "SELECT status, (SELECT count(*) FROM workspace_workerbeat) FROM knowledge_document WHERE id = %s"
RUN_STATUSES = "SELECT status FROM workflows_workflowrun ORDER BY id"


# alice's item and an hourly workflow whose first step waits for a file the test writes.
LONG_RUN = """
from collab.actor import Actor
from workspace.items import services as items
from workspace.items.config import get_config
from workspace.workflows.services import workflow_create
item = items.item_create(app=get_config().app("notebook"), title="Long", actor=Actor("alice"))
step = "until [ -e release ]; do sleep 0.1; done"
workflow_create(
    data={"name": "long", "steps": [step, "echo done"], "item_id": str(item.pk), "every_seconds": 3600},
    actor=Actor("alice"),
)
print(item.pk)
"""

RELEASE = """
import sys
from workspace.items import services
from workspace.items.models import Item
services.file_write(item=Item.objects.get(pk=sys.argv[1]), path="release", chunks=[b""])
"""

# Long enough that the waiting step is never cut short on a loaded machine.
PATIENT_CONFIG = '[sandbox]\nexec_timeout = "300s"\n'


@pytest.fixture(scope="module")
def migrated_sqlite(traversable_tmp: Path) -> Path:
    """A migrated SQLite database the tests copy (migrating takes seconds; copying does not)."""
    folder = Path(tempfile.mkdtemp(prefix="migrated", dir=traversable_tmp))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "PYTEST"))}
    env.update(DJANGO_SETTINGS_MODULE="workspace.settings", DATABASE_URL=f"sqlite:///{folder / 'db.sqlite3'}")
    run_django("from django.core.management import call_command\ncall_command('migrate', verbosity=0)\n", env)
    return folder / "db.sqlite3"


@pytest.fixture
def sqlite_url(migrated_sqlite: Path, tmp_path: Path) -> str:
    copy = tmp_path / "db.sqlite3"
    shutil.copyfile(migrated_sqlite, copy)
    return f"sqlite:///{copy}"


@pytest.fixture
def worker_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "PYTEST"))}
    env.update(
        DJANGO_SETTINGS_MODULE="workspace.settings",
        WORKSPACE_VAR_DIR=str(tmp_path / "var"),
        WORKSPACE_WORKER_HEARTBEAT_SECONDS="0.2",
    )
    return env


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    wait_for(condition, what, seconds=DEADLINE_SECONDS, poll=0.1)


def _document(env: dict[str, str], document_id: str) -> tuple[str, int]:
    """The document's status, and how many worker heartbeats are on record."""
    ((status, beats),) = query(env, DOCUMENT_STATUS, document_id)
    return status, beats


def _runs(env: dict[str, str]) -> list[str]:
    return [status for (status,) in query(env, RUN_STATUSES)]


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


def test_the_running_worker_ingests_a_queued_upload_and_beats(worker_env, start_worker, sqlite_url):
    # Given a migrated database with an upload whose ingest is queued
    env = {**worker_env, "DATABASE_URL": sqlite_url}
    document_id = run_django(QUEUE_AN_UPLOAD, env).strip()

    # When the worker runs
    process = start_worker(env)

    # Then the document becomes ready while the worker's heartbeat is on record
    _wait_for(lambda: _document(env, document_id) == ("ready", 1), "the ingest")
    # And after SIGTERM its heartbeat is gone, so nobody mistakes it for a live worker
    process.send_signal(signal.SIGTERM)
    assert process.wait(DEADLINE_SECONDS) == 0
    assert _document(env, document_id) == ("ready", 0)


def test_an_ingest_queued_behind_a_long_scheduled_run_finishes_first(worker_env, start_worker, sqlite_url, tmp_path):
    # Given alice's hourly workflow whose first step waits until released
    config = tmp_path / "patient.toml"
    config.write_text(PATIENT_CONFIG)
    env = {**worker_env, "DATABASE_URL": sqlite_url, "WORKSPACE_CONFIG": str(config)}
    item_id = run_django(LONG_RUN, env).strip()
    try:
        # When the worker runs and the scheduled run is running
        start_worker(env)
        _wait_for(lambda: _runs(env) == ["running"], "the scheduled run to start")
        # ... and an upload is queued for ingest meanwhile
        document_id = run_django(QUEUE_AN_UPLOAD, env).strip()

        # Then the document becomes ready while the run is still running
        _wait_for(lambda: _document(env, document_id)[0] == "ready", "the ingest")
        assert _runs(env) == ["running"]
        # And once released the run finishes too
        run_django(RELEASE, env, item_id)
        _wait_for(lambda: _runs(env) == ["succeeded"], "the run to finish")
    finally:
        close_sandboxes(env)

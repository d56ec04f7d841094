"""kill -9 in the middle of ingests, a scheduled run and a burst of crudgen writes, then a restart:
every document ends ready or failed with a reason, the window's run is neither lost nor doubled,
and every acknowledged write reads back."""

from __future__ import annotations

import http.client
import json
import os
import signal
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.live import Client, close_sandboxes, gunicorn, query, run_django, wait_for
from tests.production.conftest import USER, USER_PASSWORD

pytestmark = pytest.mark.postgres

# Polling a deployment has a deadline; nothing here asserts how fast anything is.
DEADLINE_SECONDS = 120
WRITERS = 4
DOCUMENTS = 6
MAX_DOCUMENTS = 40

# Quick rhythms, so the restarted worker notices the dead one within seconds.
CHAOS_ENV = {
    "WORKSPACE_SERVE_WORKER": "1",
    "WORKSPACE_WORKER_INTERVAL": "1",
    "WORKSPACE_WORKER_HEARTBEAT_SECONDS": "0.5",
    "WORKSPACE_WORKER_STALE_SECONDS": "3",
    "WORKSPACE_TASK_RETRY_SECONDS": "0.5",
}

STATE = """
import json, sys
from django_tasks_db.models import DBTaskResult
from knowledge.models import Document
from workspace.workflows.models import WorkflowRun
workflow_id = sys.argv[1]
running = sorted(DBTaskResult.objects.filter(status="RUNNING").values_list("task_path", flat=True))
runs = list(WorkflowRun.objects.filter(workflow_id=workflow_id).values("status", "window_at", "reason"))
documents = list(Document.objects.values("id", "status", "reason"))
print(json.dumps({
    "runs": [{**r, "window_at": str(r["window_at"])} for r in runs], "documents": documents, "running": running
}))
"""


def _state(env: dict[str, str], workflow_id: str) -> dict:
    return json.loads(run_django(STATE, env, workflow_id))


# What the test waits for, straight from the database: a Django process per look takes seconds on a
# loaded machine, long enough for whole ingests to run unseen between two looks.
IN_FLIGHT = """
SELECT
  (SELECT array_agg(status) FROM workflows_workflowrun WHERE workflow_id = %s),
  (SELECT count(*) FROM django_tasks_database_dbtaskresult
    WHERE status = 'RUNNING' AND task_path LIKE 'knowledge.tasks.%%'),
  (SELECT count(*) FROM knowledge_document WHERE status = 'pending')
"""


def _in_flight(env: dict[str, str], workflow_id: str) -> tuple[bool, bool, bool]:
    """Whether the run runs, an ingest runs, and a document is still pending."""
    ((runs, ingesting, pending),) = query(env, IN_FLIGHT, workflow_id)
    return runs == ["running"], ingesting > 0, pending > 0


def _settled(env: dict[str, str], workflow_id: str) -> bool:
    """Whether the run ended and no document is pending."""
    ((runs, _ingesting, pending),) = query(env, IN_FLIGHT, workflow_id)
    return bool(runs) and "running" not in runs and not pending


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    wait_for(condition, what, seconds=DEADLINE_SECONDS, poll=0.3)


def _tail(path: Path, size: int = 4000) -> str:
    return path.read_bytes()[-size:].decode(errors="replace") if path.exists() else "(none)"


def _multipart(filename: str, data: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        f"Content-Type: text/plain\r\n\r\n"
    ).encode()
    return body + data + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def _document(number: int) -> bytes:
    paragraph = f"Document {number} explains sandboxes, quotas and the worker that ingests it. " * 40
    return "\n\n".join(f"{paragraph} (part {part})" for part in range(300)).encode()


class Burst:
    """Writers that create a workflow each, then patch its description d1, d2, ... until stopped,
    keeping what the server acknowledged."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.stop = threading.Event()
        self.acknowledged: dict[str, int] = {}  # resource id -> last acknowledged description number
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._write, args=(n,)) for n in range(WRITERS)]

    def _write(self, number: int) -> None:
        client = Client(self.port, timeout=10)
        try:
            client.login(USER, USER_PASSWORD)
            created = client.request("POST", "/api/v1/workflow", {"name": f"burst {number}", "steps": ["true"]})
            if created.status != 201:
                return
            resource_id = created.json()["resource_id"]
            with self.lock:
                self.acknowledged[resource_id] = 0
            version = 0
            while not self.stop.is_set():
                version += 1
                patch = json.dumps([{"op": "replace", "path": "/description", "value": f"d{version}"}]).encode()
                answer = client.request(
                    "PATCH",
                    f"/api/v1/workflow/{resource_id}",
                    patch,
                    {"Content-Type": "application/json-patch+json"},
                    raw=True,
                )
                if answer.status == 200:
                    with self.lock:
                        self.acknowledged[resource_id] = version
        except (OSError, http.client.HTTPException):
            # The server died under us, maybe mid-answer: what was acknowledged before is what counts.
            return
        finally:
            client.close()

    def patched(self) -> bool:
        """Whether a patch (beyond a creation) was acknowledged yet."""
        with self.lock:
            return any(version > 0 for version in self.acknowledged.values())

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)


# The run's step waits for this file instead of sleeping a fixed time, so however loaded the machine,
# the kill lands mid-run; the test writes it once the restarted deployment should finish the run.
RELEASE = "release"
SLOW_STEP = f"until [ -e {RELEASE} ]; do sleep 0.2; done"
# Long enough for that wait on a loaded machine (the default 30 s would end the step first).
CHAOS_CONFIG = '[sandbox]\nexec_timeout = "600s"\n'


def test_a_kill_9_in_the_middle_of_everything_loses_and_doubles_nothing(
    deployment, start_worker, worker_log: Path, tmp_path: Path
) -> None:
    config = tmp_path / "chaos.toml"
    config.write_text(CHAOS_CONFIG)
    env = {**deployment, **CHAOS_ENV, "WORKSPACE_CONFIG": str(config)}
    try:
        with gunicorn(env, tmp_path / "first.log", workers=2) as server:
            # Given bob's item with an hourly workflow that runs for a while, and a collection
            client = Client(server.port, timeout=30)
            client.login(USER, USER_PASSWORD)
            item_id = client.request("POST", "/a/notebook/items", {"title": "chaos"}).json()["id"]
            collection_id = client.request("POST", "/kb/collections", {"name": "Chaos"}).json()["id"]
            workflow = client.request(
                "POST",
                "/api/v1/workflow",
                {"name": "slow", "steps": [SLOW_STEP, "echo done"], "item_id": str(item_id), "every_seconds": 3600},
            )
            assert workflow.status == 201, workflow.body
            workflow_id = workflow.json()["resource_id"]

            # And a second task worker beside the one gunicorn started, so an ingest runs beside the run
            second_worker = start_worker(env)

            # When the scheduled run is running
            _wait_for(lambda: _in_flight(env, workflow_id)[0], "the run")
            # ... documents are uploaded and crudgen writes pour in
            burst = Burst(server.port)
            burst.start()
            uploaded: list[str] = []

            def upload() -> None:
                body, content_type = _multipart(f"doc{len(uploaded)}.txt", _document(len(uploaded)))
                answer = client.request(
                    "POST", f"/kb/collections/{collection_id}/documents", body, {"Content-Type": content_type}, raw=True
                )
                assert answer.status == 202, answer.body
                uploaded.append(answer.json()["id"])

            for _ in range(DOCUMENTS):
                upload()

            def mid_run_and_mid_ingest() -> bool:
                run_running, ingesting, pending = _in_flight(env, workflow_id)
                if run_running and ingesting and burst.patched():
                    return True
                # Every upload so far was ingested between two looks (a fast machine): one more
                # keeps the worker ingesting, so a look catches it mid-way.
                if not pending and len(uploaded) < MAX_DOCUMENTS:
                    upload()
                return False

            try:
                wait_for(
                    mid_run_and_mid_ingest,
                    "an ingest and crudgen writes beside the run",
                    seconds=DEADLINE_SECONDS,
                    poll=0.02,
                )
            except AssertionError as exc:
                # What the deployment was doing, for whoever reads a failed run's log.
                logs = {path.name: _tail(path) for path in (tmp_path / "first.log", worker_log)}
                raise AssertionError(f"{exc}; state {_state(env, workflow_id)}; logs {logs}") from None

            # ... and everything is killed at once: master, web workers and both task workers
            os.killpg(server.process.pid, signal.SIGKILL)
            second_worker.kill()
            server.process.wait(30)
            second_worker.wait(30)
            burst.join()
            client.close()

        # Then, once restarted (and the run's step released), the worker finishes what was cut short
        with gunicorn(env, tmp_path / "second.log", workers=2) as restarted:
            releaser = Client(restarted.port, timeout=30)
            releaser.login(USER, USER_PASSWORD)
            released = releaser.request(
                "PUT",
                f"/a/notebook/items/{item_id}/files/{RELEASE}",
                b"",
                {"Content-Type": "application/octet-stream"},
                raw=True,
            )
            assert released.status == 200, released.body
            releaser.close()

            _wait_for(lambda: _settled(env, workflow_id), "every document and the run to settle")
            state = _state(env, workflow_id)

            # Every acknowledged upload ended ready, or failed with its reason
            documents = {d["id"]: d for d in state["documents"]}
            for document_id in uploaded:
                document = documents[document_id]
                assert document["status"] == "ready" or (document["status"] == "failed" and document["reason"])
            # The window claimed before the kill has exactly one record, run to its end
            assert len(state["runs"]) == 1, state["runs"]
            assert state["runs"][0]["status"] == "succeeded", state["runs"][0]
            # Every acknowledged crudgen write reads back (a later, unacknowledged one may have landed too)
            reader = Client(restarted.port, timeout=30)
            reader.login(USER, USER_PASSWORD)
            assert burst.acknowledged, "no crudgen write was acknowledged before the kill"
            for resource_id, version in burst.acknowledged.items():
                answer = reader.get(f"/api/v1/workflow/{resource_id}/data")
                assert answer.status == 200, answer.body
                description = answer.json()["description"]
                landed = int(description[1:]) if description else 0
                assert landed >= version, (resource_id, description, version)
            reader.close()
    finally:
        close_sandboxes(env)

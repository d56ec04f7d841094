"""Two `manage.py worker --once` processes racing on one due scheduled workflow never both run it."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from bench.live import REPO, close_sandboxes, query, run_django

pytestmark = pytest.mark.postgres

ROUNDS = 4
WORKERS = 2

SCHEDULED_WORKFLOW = """
from django.contrib.auth.models import User
from collab.actor import Actor
from workspace.items import services
from workspace.items.access import app_or_404
from workspace.workflows.generated import workflows
User.objects.create_user("alice", password="alice-secret-1")
item = services.item_create(app=app_or_404("notebook"), title="race", actor=Actor("alice"))
workflow = workflows.create(
    {"name": "tick", "steps": ["echo tick"], "item_id": str(item.pk), "every_seconds": 3600}, user="alice"
)
print(workflow["resource_id"])
"""

# `manage.py worker --once`, once per round, each round started by a file so both processes
# enter the scheduler together instead of one finishing before the other has imported Django.
RACING_WORKER = """
import sys, time
from pathlib import Path
import django
django.setup()
from django.core.management import call_command
folder, rounds = Path(sys.argv[1]), int(sys.argv[2])
(folder / f"ready-{sys.argv[3]}").touch()
for n in range(rounds):
    go = folder / f"go-{n}"
    while not go.exists():
        time.sleep(0.002)
    call_command("worker", "--once")
    (folder / f"done-{n}-{sys.argv[3]}").touch()
"""

# Straight SQL, as bench.live.query says why: a Django process per step costs a second of CPU.
MAKE_DUE_AGAIN = "UPDATE workflows_workflowschedule SET next_run_at = now()"
COUNT_RUNS = "SELECT count(*) FROM workflows_workflowrun WHERE workflow_id = %s AND trigger = 'scheduled'"


def _wait_for(paths, deadline: float, processes) -> None:
    while not all(path.exists() for path in paths):
        for process in processes:
            if process.poll() not in (None, 0):
                raise AssertionError(f"a worker failed: {process.communicate()}")
        assert time.monotonic() < deadline, "the workers did not finish in time"
        time.sleep(0.01)


def test_racing_worker_processes_never_run_one_due_scheduled_workflow_twice(deployment, tmp_path):
    # Given a notebook with an hourly workflow that is due, and two worker processes ready
    workflow_id = run_django(SCHEDULED_WORKFLOW, deployment).strip().splitlines()[-1]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", RACING_WORKER, str(tmp_path), str(ROUNDS), str(n)],
            cwd=REPO,
            env=deployment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WORKERS)
    ]
    try:
        _wait_for([tmp_path / f"ready-{n}" for n in range(WORKERS)], time.monotonic() + 30, processes)
        # When both run the scheduler at the same moment, four rounds over, the workflow due again before each
        for round_number in range(ROUNDS):
            if round_number:
                query(deployment, MAKE_DUE_AGAIN)
            (tmp_path / f"go-{round_number}").touch()
            done = [tmp_path / f"done-{round_number}-{n}" for n in range(WORKERS)]
            _wait_for(done, time.monotonic() + 30, processes)
        outputs = [process.communicate(timeout=30)[0] for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        close_sandboxes(deployment)
    # Then each round ran the workflow once: four runs, none twice
    started = sum(output.count("scheduled_workflow_run_task: succeeded") for output in outputs)
    assert started == ROUNDS, outputs
    assert query(deployment, COUNT_RUNS, workflow_id) == [(ROUNDS,)]

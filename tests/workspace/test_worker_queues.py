"""The worker's two queues: ingest never waits behind a workflow run, and one person's runs take one
runner at a time, so they never hold up anyone else's."""

from __future__ import annotations

import pytest
from django_tasks_db.models import DBTaskResult

from collab.actor import Actor
from knowledge import services
from knowledge.tasks import KNOWLEDGE_QUEUE, ingest_document_task
from workspace.worker import WorkerIdentity, beat, claim_next, orphans_requeue
from workspace.workflows.tasks import RUNS_QUEUE, scheduled_workflow_run_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def worker(clock) -> WorkerIdentity:
    return WorkerIdentity(worker_id="worker-a")


def _queue_run(window: str, user_id: str | None = "alice") -> str:
    """Queues the run of one window of a workflow of `user_id` (None: a run queued before runs named their person)."""
    kwargs = {"workflow_id": f"wf-{user_id}-{window}", "item_id": 1, "window_at": f"2030-01-01T0{window}:00:00+00:00"}
    if user_id is not None:
        kwargs["user_id"] = user_id
    return str(scheduled_workflow_run_task.enqueue(**kwargs).id)


def _queue_ingest() -> None:
    collection = services.collection_create(actor=Actor("bob"), name="Notes")
    services.document_upload(
        collection_id=collection.id,
        actor=Actor("bob"),
        filename="a.txt",
        content_type="text/plain",
        data=b"26 bytes of a small note.",
    )


def _claimed(worker: WorkerIdentity, queue: str | None = None) -> str | None:
    row = claim_next(worker, queue=queue)
    return None if row is None else str(row.id)


def test_an_ingest_queued_after_a_run_is_on_a_queue_of_its_own(worker):
    # Given alice's scheduled run queued, then bob's upload
    run = _queue_run("1")
    _queue_ingest()

    # When the thread that serves the uploads looks for work
    row = claim_next(worker, queue=KNOWLEDGE_QUEUE)

    # Then it takes the ingest at once; the run waits for a runner of its own queue, and the
    # default queue's thread (liveness, the scheduler) has nothing of either
    assert row is not None
    assert row.task_path == ingest_document_task.module_path
    assert DBTaskResult.objects.get(pk=run).queue_name == RUNS_QUEUE
    assert claim_next(worker, queue="default") is None


def test_a_persons_second_run_waits_while_their_first_runs_and_another_persons_goes_ahead(worker):
    # Given two runs of alice queued before one of bob
    first, second = _queue_run("1"), _queue_run("2")
    bobs = _queue_run("3", user_id="bob")

    # When two runners take work while alice's first run is running
    taken = [_claimed(worker, RUNS_QUEUE), _claimed(worker, RUNS_QUEUE), _claimed(worker, RUNS_QUEUE)]

    # Then the second runner took bob's run, and alice's second waits
    assert taken == [first, bobs, None]
    # When alice's first run finishes / Then her second is taken
    DBTaskResult.objects.get(pk=first).set_successful(None)
    assert _claimed(worker, RUNS_QUEUE) == second


def test_a_run_queued_before_runs_named_their_person_is_still_run(worker):
    # Given a run queued without a person (an older release), while alice's run is running
    alices = _queue_run("1")
    older = _queue_run("2", user_id=None)
    assert _claimed(worker, RUNS_QUEUE) == alices

    # When a runner looks for work / Then it takes the older run
    assert _claimed(worker, RUNS_QUEUE) == older


def test_a_run_this_workers_runner_holds_is_not_taken_for_an_orphan(worker):
    # Given a runner of this worker running alice's run
    beat(worker)
    run = _queue_run("1")
    assert _claimed(worker, RUNS_QUEUE) == run

    # When this worker's own thread scans for orphans / Then it leaves the run alone
    assert orphans_requeue(worker) == 0
    assert DBTaskResult.objects.get(pk=run).status == "RUNNING"
    # And a row of this worker that none of its threads holds (a run cut off mid-record) goes back
    worker.holding.clear()
    assert orphans_requeue(worker) == 1

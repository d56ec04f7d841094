"""`manage.py worker`'s engine: retries with backoff, a visible failure, orphaned tasks, the periodic schedule."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django_tasks_db.models import DBTaskResult, get_date_max

from collab.actor import Actor
from collab.background import retry_delay
from knowledge import ingest, services
from knowledge.models import Collection, Document
from knowledge.tasks import ingest_document_task
from workspace.models import PeriodicJob, WorkerBeat
from workspace.tasks import PERIODIC, disk_sweep_task, task_results_prune_task
from workspace.worker import WorkerIdentity, beat, claim_next, drain, orphans_requeue, periodic_enqueue

pytestmark = pytest.mark.django_db


@pytest.fixture
def worker(clock) -> WorkerIdentity:
    return WorkerIdentity(worker_id="worker-a")


@pytest.fixture
def collection(db: None) -> Collection:
    return services.collection_create(actor=Actor("alice"), name="Handbook")


@pytest.fixture
def pending_document(collection: Collection) -> Document:
    """An uploaded document whose ingest task is queued."""
    return services.document_upload(
        collection_id=collection.id,
        actor=Actor("alice"),
        filename="notes.txt",
        content_type="text/plain",
        data=b"Quotas.",
    )


@pytest.fixture
def ingest_crashes(monkeypatch) -> None:
    def crash(**_kwargs: object) -> bool:
        raise RuntimeError("the search index is down")

    monkeypatch.setattr(ingest, "document_chunks_store", crash)


def _ingest_row() -> DBTaskResult:
    return DBTaskResult.objects.get(task_path=ingest_document_task.module_path)


def test_a_failing_task_is_tried_again_after_a_growing_backoff(worker, pending_document, ingest_crashes, clock):
    # Given an ingest that crashes
    # When the worker runs it
    [first] = drain(worker)

    # Then it waits to be retried, the error kept on its row, the document still pending
    row = _ingest_row()
    assert (first.outcome, row.status) == ("retrying", "READY")
    assert row.run_after == clock.current + timedelta(seconds=10)
    assert "the search index is down" in row.traceback
    assert Document.objects.get().status == "pending"
    # And it is not run again before its backoff ends
    assert drain(worker) == []
    clock.advance(seconds=10)
    assert [ran.outcome for ran in drain(worker)] == ["retrying"]
    assert _ingest_row().run_after == clock.current + timedelta(seconds=20)


def test_the_backoff_doubles_up_to_its_cap(settings):
    # Given a 10 s base and a 600 s cap
    settings.WORKSPACE_TASK_RETRY_SECONDS, settings.WORKSPACE_TASK_RETRY_MAX_SECONDS = 10, 600

    # When the wait before each attempt is worked out / Then it doubles and stops at the cap
    assert [retry_delay(n).total_seconds() for n in (1, 2, 3, 6, 7, 20)] == [10, 20, 40, 320, 600, 600]


def test_after_the_last_attempt_the_document_shows_failed_and_why(
    worker, pending_document, ingest_crashes, clock, settings
):
    # Given an ingest that crashes on each of its 3 attempts
    settings.WORKSPACE_TASK_MAX_ATTEMPTS = 3
    outcomes = []

    # When the worker tries until it gives up
    for _attempt in range(3):
        outcomes += [ran.outcome for ran in drain(worker)]
        clock.advance(hours=1)

    # Then the task is failed with its traceback and the document says why
    assert outcomes == ["retrying", "retrying", "failed"]
    row = _ingest_row()
    assert (row.status, row.exception_class_path) == ("FAILED", "builtins.RuntimeError")
    document = Document.objects.get()
    assert document.status == "failed"
    assert document.reason == "Failed after 3 attempts (RuntimeError: the search index is down)."


def test_one_failing_task_does_not_stop_the_others(worker, pending_document, ingest_crashes):
    # Given a crashing ingest queued before a periodic task
    disk_sweep_task.enqueue()

    # When the worker drains the queue
    ran = drain(worker)

    # Then both ran, one to retry and one to success
    assert sorted((r.task_name, r.outcome.value) for r in ran) == [
        ("disk_sweep_task", "succeeded"),
        ("ingest_document_task", "retrying"),
    ]


def test_a_task_naming_no_task_fails_and_the_worker_goes_on(worker, pending_document):
    # Given a queued row whose task path names nothing importable, before a real ingest
    DBTaskResult.objects.create(
        args_kwargs={"args": [], "kwargs": {}},
        task_path="knowledge.tasks.no_such_task",
        backend_name="default",
        run_after=get_date_max(),
        priority=1,
    )

    # When the worker drains the queue
    ran = drain(worker)

    # Then the bad row is failed and the ingest still ran
    assert sorted(r.outcome.value for r in ran) == ["failed", "succeeded"]
    assert Document.objects.get().status == "ready"


def test_a_task_left_running_by_a_dead_worker_is_run_again(worker, pending_document, clock):
    # Given worker B claimed the ingest, then died (its heartbeat went stale)
    dead = WorkerIdentity(worker_id="worker-b")
    beat(dead)
    assert claim_next(dead) is not None
    clock.advance(minutes=5)
    beat(worker)

    # When worker A looks for orphans and drains
    assert orphans_requeue(worker) == 1
    ran = drain(worker)

    # Then the ingest ran (its second attempt) and the document is ready
    assert [r.outcome.value for r in ran] == ["succeeded"]
    assert _ingest_row().worker_ids == ["worker-b", "worker-a"]
    assert Document.objects.get().status == "ready"


def test_a_task_running_under_a_live_worker_is_left_alone(worker, pending_document):
    # Given worker B, alive, is running the ingest
    busy = WorkerIdentity(worker_id="worker-b")
    beat(busy)
    claim_next(busy)
    beat(worker)

    # When worker A looks for orphans / Then it leaves B's task running
    assert orphans_requeue(worker) == 0
    assert _ingest_row().status == "RUNNING"


def test_a_task_whose_worker_died_on_its_last_attempt_is_failed_with_the_reason(
    worker, pending_document, clock, settings
):
    # Given a one-attempt budget and the worker running the ingest died
    settings.WORKSPACE_TASK_MAX_ATTEMPTS = 1
    dead = WorkerIdentity(worker_id="worker-b")
    beat(dead)
    claim_next(dead)
    clock.advance(minutes=5)

    # When another worker looks for orphans
    assert orphans_requeue(worker) == 1

    # Then the task is failed and the document says the worker stopped
    assert _ingest_row().status == "FAILED"
    document = Document.objects.get()
    assert document.status == "failed"
    assert "The worker running it (worker-b) stopped during attempt 1." in document.reason


def test_two_workers_enqueue_each_periodic_task_once_per_interval(worker, clock):
    # Given two workers ticking in the same instant
    # When both enqueue what is due
    first = periodic_enqueue(interval=30)
    second = periodic_enqueue(interval=30)

    # Then every periodic task is queued once
    assert len(first) == len(PERIODIC)
    assert second == []
    assert DBTaskResult.objects.count() == len(PERIODIC)


def test_a_periodic_task_still_waiting_is_not_queued_again(worker, clock):
    # Given the periodic tasks were queued and nobody ran them
    periodic_enqueue(interval=30)

    # When their interval passes
    clock.advance(seconds=30)
    again = periodic_enqueue(interval=30)

    # Then no second copy piles up, and the jobs are due again later
    assert again == []
    assert DBTaskResult.objects.count() == len(PERIODIC)
    assert set(PeriodicJob.objects.values_list("due_at", flat=True)) == {clock.current + timedelta(seconds=30)}


def test_worker_once_runs_every_periodic_task_and_leaves_no_heartbeat(capsys, clock):
    # Given a fresh database, where every periodic task is due
    # When `manage.py worker --once` runs
    call_command("worker", "--once")

    # Then each periodic task ran once and succeeded, and the worker left no heartbeat behind
    out = capsys.readouterr().out
    for job in PERIODIC:
        assert f"{job.name}: succeeded" in out
    assert f"ran {len(PERIODIC)} tasks: {len(PERIODIC)} succeeded, 0 to retry, 0 failed" in out
    assert not WorkerBeat.objects.exists()


def test_the_upload_service_queues_the_ingest_for_the_api(api_client_for, collection):
    # Given a collection (the fixture)
    # When alice uploads through the API
    api_client_for("alice").post(
        f"/kb/collections/{collection.id}/documents",
        {"file": SimpleUploadedFile("a.txt", b"Alpha.", content_type="text/plain")},
        format="multipart",
    )

    # Then the upload service queued the ingest in its transaction (no view started it)
    assert _ingest_row().args_kwargs["kwargs"]["content_version"] == 1


def test_pruning_forgets_old_results_and_gone_workers_and_keeps_the_rest(worker, pending_document, clock, settings):
    # Given a finished ingest, a gone worker's heartbeat, and a week to keep them
    settings.WORKSPACE_TASK_RESULT_DAYS = 7
    beat(WorkerIdentity(worker_id="gone"))
    drain(worker)
    # django-tasks-db stamps results with the wall clock; put this one on the test's clock.
    DBTaskResult.objects.filter(status="SUCCESSFUL").update(finished_at=clock.current)
    disk_sweep_task.enqueue()

    # When the prune runs eight days later (the sweep still queued, alice's worker beating)
    clock.advance(days=8)
    beat(worker)
    report = task_results_prune_task.call()

    # Then the old result and heartbeat are gone, the queued task and the live heartbeat stay
    assert report == {"deleted": 1, "workers_forgotten": 1}
    assert list(DBTaskResult.objects.values_list("status", flat=True)) == ["READY"]
    assert list(WorkerBeat.objects.values_list("worker_id", flat=True)) == ["worker-a"]


def test_the_workers_idle_poll_and_a_trivial_task_take_a_fixed_few_queries(
    worker, clock, django_assert_max_num_queries
):
    # Given the periodic tasks queued and run once
    periodic_enqueue(interval=30)
    drain(worker)
    beat(worker)

    # When the worker polls with nothing due, scans for orphans and runs one small task
    # Then each stays within a few queries
    with django_assert_max_num_queries(1):
        assert periodic_enqueue(interval=30) == []
    with django_assert_max_num_queries(2):
        orphans_requeue(worker)
    disk_sweep_task.enqueue()
    # (claim, record, the sweep's own reads and the disk rows it compares with to hold sandboxes to
    # their owners' totals; a savepoint pair, since the test runs in a transaction)
    with django_assert_max_num_queries(9):
        drain(worker, limit=1)

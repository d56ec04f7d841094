"""The scheduler: enabled workflows with `every_seconds` and an `item_id` run headlessly, once per due time."""

from __future__ import annotations

import threading

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django_tasks_db.models import DBTaskResult

from collab.errors import Unavailable
from workspace.items import lifecycle
from workspace.workflows import scheduler
from workspace.workflows.generated import workflows
from workspace.workflows.models import WorkflowRun, WorkflowSchedule
from workspace.workflows.services import scheduled_run

pytestmark = pytest.mark.django_db


def _scheduled(make_workflow, item, **fields):
    return make_workflow(["echo tick"], item_id=str(item.pk), every_seconds=60, **fields)


def test_a_scheduled_workflow_runs_headlessly_on_its_item(scheduler_tick, make_item, make_workflow, clock):
    # Given alice's workflow scheduled every minute on her notebook
    item = make_item()
    workflow_id = _scheduled(make_workflow, item)
    # When the scheduler ticks
    report = scheduler_tick()
    # Then it runs once, headless, as a scheduled run on that item in alice's name
    assert (report.scheduled, report.started, report.not_run) == (1, 1, 0)
    run = WorkflowRun.objects.get()
    assert (run.workflow_id, run.item_id, run.trigger, run.status) == (workflow_id, item.pk, "scheduled", "succeeded")
    assert run.steps[0]["stdout"] == "tick\n"
    assert run.created_by == "alice"


def test_it_does_not_run_again_before_its_interval(scheduler_tick, make_item, make_workflow, clock):
    # Given alice's workflow scheduled every minute, run once
    _scheduled(make_workflow, make_item())
    scheduler_tick()
    # When 59 s pass
    clock.advance(seconds=59)
    # Then a tick starts nothing
    assert scheduler_tick().started == 0
    # When one more second passes
    clock.advance(seconds=1)
    # Then a tick starts it again, its second run
    assert scheduler_tick().started == 1
    assert WorkflowRun.objects.count() == 2


def test_missed_intervals_run_once_not_once_each(scheduler_tick, make_item, make_workflow, clock):
    # Given alice's workflow scheduled every minute, run once
    _scheduled(make_workflow, make_item())
    scheduler_tick()
    # When five hours pass
    clock.advance(hours=5)
    # Then the next tick runs it once, not once per missed minute
    assert scheduler_tick().started == 1


@pytest.mark.parametrize(
    "fields",
    [{"enabled": False}, {"every_seconds": None}, {"every_seconds": 0}, {"item_id": None}, {"item_id": "abc"}],
)
def test_only_enabled_workflows_with_an_interval_and_an_item_are_scheduled(
    scheduler_tick, make_item, make_workflow, clock, fields
):
    # Given a workflow that is disabled, has no interval or a zero one, or names no item or an item that is no id
    item = make_item()
    make_workflow(["true"], **{"item_id": str(item.pk), "every_seconds": 60, **fields})
    # When the scheduler ticks / Then nothing is scheduled
    assert scheduler_tick().scheduled == 0
    # Then nothing runs
    assert not WorkflowRun.objects.exists()


def test_a_quota_refusal_leaves_a_visible_not_run_record(
    scheduler_tick, make_item, make_workflow, clock, cpu_exhausted
):
    # Given a scheduled workflow of alice, whose cpu limit is below one notebook sandbox
    _scheduled(make_workflow, make_item())
    # When the scheduler ticks
    assert scheduler_tick().not_run == 1
    # Then the window has a visible "not run" record naming the quota
    run = WorkflowRun.objects.get()
    assert run.status == "not_run"
    assert run.reason.startswith(f"not run due to quota: {cpu_exhausted}")
    assert run.started_at is None
    assert run.finished_at == clock.current


def test_a_backend_outage_leaves_a_not_run_record_with_its_reason(
    scheduler_tick, make_item, make_workflow, clock, monkeypatch
):
    # Given a sandbox backend that is down, and a workflow scheduled every minute
    def unavailable(**_kwargs):
        raise Unavailable(error="sandbox_host_unavailable", detail="host down")

    monkeypatch.setattr(lifecycle, "sandbox_for_item", unavailable)
    _scheduled(make_workflow, make_item())
    # When the scheduler ticks
    scheduler_tick()
    # Then the window has a not-run record naming the outage
    assert WorkflowRun.objects.get().reason == "not run: host down"


def test_a_missing_item_leaves_a_not_run_record(scheduler_tick, make_workflow, clock, db):
    # Given a workflow scheduled every minute on an item that does not exist
    make_workflow(["true"], item_id="424242", every_seconds=60)
    # When the scheduler ticks
    scheduler_tick()
    # Then the window has a not-run record, with no item, naming the missing one
    run = WorkflowRun.objects.get()
    assert (run.status, run.item_id, run.reason) == ("not_run", None, "not run: item 424242 does not exist.")


def test_a_deleted_workflow_loses_its_schedule(make_item, make_workflow, clock):
    # Given a scheduled workflow, synced into the schedule
    workflow_id = _scheduled(make_workflow, make_item())
    scheduler.schedules_sync()
    # When it is deleted
    workflows.delete(workflow_id, user="alice")
    # Then the next sync schedules nothing and its schedule is gone
    assert scheduler.schedules_sync() == 0
    assert not WorkflowSchedule.objects.exists()


def test_a_changed_interval_applies_from_the_next_run(scheduler_tick, make_item, make_workflow, clock):
    # Given alice's workflow scheduled every minute, run once
    item = make_item()
    workflow_id = _scheduled(make_workflow, item)
    scheduler_tick()
    # When its interval becomes two minutes and the schedule is synced
    workflows.update(
        workflow_id, {"name": "checks", "steps": ["true"], "item_id": str(item.pk), "every_seconds": 120}, user="alice"
    )
    scheduler.schedules_sync()
    # Then the schedule runs every two minutes
    assert WorkflowSchedule.objects.get().every_seconds == 120


def test_a_due_run_is_claimed_once(make_item, make_workflow, clock):
    # Given a scheduled workflow that is due
    _scheduled(make_workflow, make_item())
    scheduler.schedules_sync()
    # When its run is claimed / Then the claim succeeds
    assert scheduler.schedule_claim_due() is True
    # When it is claimed again / Then the claim fails: it was taken
    assert scheduler.schedule_claim_due() is False


def test_a_window_due_while_the_previous_run_still_waits_is_skipped(run_tasks, make_item, make_workflow, clock):
    # Given alice's every-minute workflow whose run of the first window is queued and not run yet
    _scheduled(make_workflow, make_item())
    scheduler.schedules_enqueue_due()

    # When the next two windows come due before the worker gets to it
    for _minute in range(2):
        clock.advance(minutes=1)
        scheduler.schedules_enqueue_due()

    # Then only the first window's run is queued, in alice's name, and it runs once
    [queued] = DBTaskResult.objects.all()
    assert queued.args_kwargs["kwargs"]["user_id"] == "alice"
    assert [ran.outcome for ran in run_tasks()] == ["succeeded"]
    # And once it ran, the next window is queued again
    clock.advance(minutes=1)
    scheduler.schedules_enqueue_due()
    assert DBTaskResult.objects.filter(status="READY").count() == 1


def test_the_worker_command_runs_due_scheduled_workflows(make_item, make_workflow, clock, capsys):
    # Given a due scheduled workflow
    _scheduled(make_workflow, make_item())

    # When `manage.py worker --once` runs
    call_command("worker", "--once")

    # Then its run is enqueued and run, and the worker says so
    assert WorkflowRun.objects.get().status == "succeeded"
    assert "scheduled_workflow_run_task: succeeded (succeeded)" in capsys.readouterr().out


def test_a_window_blocked_by_quota_leaves_one_record_however_often_the_worker_ticks(
    scheduler_tick, make_item, make_workflow, clock, cpu_exhausted
):
    # Given an hourly workflow whose sandbox the real gate refuses (cpu limit below one sandbox)
    make_workflow(["true"], item_id=str(make_item().pk), every_seconds=3600)

    # When the worker ticks every minute for eight minutes, then once after the hour
    for _minute in range(8):
        scheduler_tick()
        clock.advance(minutes=1)
    clock.advance(hours=1)
    scheduler_tick()

    # Then there is one not-run record per window: two
    assert list(WorkflowRun.objects.values_list("status", flat=True)) == ["not_run", "not_run"]


def test_a_window_run_again_after_its_worker_died_keeps_one_record(make_item, make_workflow, clock):
    # Given a window whose run was recorded as running when its worker died
    item = make_item()
    workflow_id = _scheduled(make_workflow, item)
    window = clock.current
    WorkflowRun.objects.create(
        workflow_id=workflow_id, item=item, trigger="scheduled", status="running", window_at=window
    )

    # When the window's task runs again, twice
    first = scheduled_run(workflow_id=workflow_id, item_id=item.pk, window_at=window)
    second = scheduled_run(workflow_id=workflow_id, item_id=item.pk, window_at=window)

    # Then the one record ran to its end, and the second attempt did not run it again
    assert first.pk == second.pk
    assert WorkflowRun.objects.get().status == "succeeded"
    assert second.steps[0]["stdout"] == "tick\n"


def test_a_window_the_worker_gave_up_on_says_why(run_tasks, make_item, make_workflow, clock, settings, monkeypatch):
    # Given a due workflow whose runs keep crashing, and two attempts per task
    settings.WORKSPACE_TASK_MAX_ATTEMPTS = 2

    def crash(**_kwargs):
        raise RuntimeError("sandbox host answered garbage")

    monkeypatch.setattr(lifecycle, "sandbox_for_item", crash)
    _scheduled(make_workflow, make_item())
    scheduler.schedules_enqueue_due()

    # When the worker tries, waits out the backoff, and tries again
    assert [ran.outcome for ran in run_tasks()] == ["retrying"]
    clock.advance(minutes=10)
    assert [ran.outcome for ran in run_tasks()] == ["failed"]

    # Then the window's one record is failed and names the error
    run = WorkflowRun.objects.get()
    assert run.status == "failed"
    assert "Failed after 2 attempts (RuntimeError: sandbox host answered garbage)" in run.reason


@pytest.mark.postgres(reason="SKIP LOCKED is a PostgreSQL feature; SQLite is covered by the compare-and-set test above")
@pytest.mark.django_db(transaction=True)
def test_two_workers_on_postgresql_never_claim_the_same_due_run(make_item, make_workflow, clock):
    # Given PostgreSQL, which can skip locked rows, and a due scheduled workflow
    _scheduled(make_workflow, make_item())
    scheduler.schedules_sync()
    # When a first worker holds its row lock and a second tries to claim it meanwhile
    holding, release, claims = threading.Event(), threading.Event(), []

    def first_worker():
        # Holds the row lock the way a worker does mid-claim, until the second worker has looked.
        with transaction.atomic():
            WorkflowSchedule.objects.select_for_update().get()
            holding.set()
            release.wait(10)
        connection.close()

    def second_worker():
        holding.wait(10)
        claims.append(scheduler.schedule_claim_due())
        release.set()
        connection.close()

    threads = [threading.Thread(target=first_worker), threading.Thread(target=second_worker)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    # Then the second does not get it, and once the lock is gone it can be claimed
    assert claims == [False]
    assert scheduler.schedule_claim_due() is True

"""The scheduler: enabled workflows with `every_seconds` and an `item_id` run headlessly, once per due time."""

from __future__ import annotations

import threading

import pytest
from django.core.management import call_command
from django.db import connection, transaction

from collab.errors import ApiError
from workspace.generated import workflows
from workspace.models import WorkflowRun, WorkflowSchedule
from workspace.sandboxes import lifecycle
from workspace.services import worker_pass
from workspace.workflows import scheduler

pytestmark = pytest.mark.django_db


def _scheduled(make_workflow, item, **fields):
    return make_workflow(["echo tick"], item_id=str(item.pk), every_seconds=60, **fields)


def test_a_scheduled_workflow_runs_headlessly_on_its_item(make_item, make_workflow, clock):
    item = make_item()
    workflow_id = _scheduled(make_workflow, item)
    report = scheduler.schedules_run_due()
    assert (report.scheduled, report.started, report.not_run) == (1, 1, 0)
    run = WorkflowRun.objects.get()
    assert (run.workflow_id, run.item_id, run.trigger, run.status) == (workflow_id, item.pk, "scheduled", "succeeded")
    assert run.steps[0]["stdout"] == "tick\n"
    assert run.created_by == "alice"


def test_it_does_not_run_again_before_its_interval(make_item, make_workflow, clock):
    _scheduled(make_workflow, make_item())
    scheduler.schedules_run_due()
    clock.advance(seconds=59)
    assert scheduler.schedules_run_due().started == 0
    clock.advance(seconds=1)
    assert scheduler.schedules_run_due().started == 1
    assert WorkflowRun.objects.count() == 2


def test_missed_intervals_run_once_not_once_each(make_item, make_workflow, clock):
    _scheduled(make_workflow, make_item())
    scheduler.schedules_run_due()
    clock.advance(hours=5)
    assert scheduler.schedules_run_due().started == 1


@pytest.mark.parametrize(
    "fields",
    [{"enabled": False}, {"every_seconds": None}, {"every_seconds": 0}, {"item_id": None}, {"item_id": "abc"}],
)
def test_only_enabled_workflows_with_an_interval_and_an_item_are_scheduled(make_item, make_workflow, clock, fields):
    item = make_item()
    make_workflow(["true"], **{"item_id": str(item.pk), "every_seconds": 60, **fields})
    assert scheduler.schedules_run_due().scheduled == 0
    assert not WorkflowRun.objects.exists()


def test_a_quota_refusal_leaves_a_visible_not_run_record(make_item, make_workflow, clock, monkeypatch):
    def refuse(**_kwargs):
        raise ApiError(status_code=507, error="sandbox_quota_exceeded", detail="2 of 2 sandboxes live.")

    monkeypatch.setattr(lifecycle, "sandbox_for_item", refuse)
    _scheduled(make_workflow, make_item())
    assert scheduler.schedules_run_due().not_run == 1
    run = WorkflowRun.objects.get()
    assert (run.status, run.reason) == ("not_run", "not run due to quota: 2 of 2 sandboxes live.")
    assert run.started_at is None
    assert run.finished_at == clock.current


def test_a_backend_outage_leaves_a_not_run_record_with_its_reason(make_item, make_workflow, clock, monkeypatch):
    def unavailable(**_kwargs):
        raise ApiError(status_code=503, error="sandbox_host_unavailable", detail="host down")

    monkeypatch.setattr(lifecycle, "sandbox_for_item", unavailable)
    _scheduled(make_workflow, make_item())
    scheduler.schedules_run_due()
    assert WorkflowRun.objects.get().reason == "not run: host down"


def test_a_missing_item_leaves_a_not_run_record(make_workflow, clock, db):
    make_workflow(["true"], item_id="424242", every_seconds=60)
    scheduler.schedules_run_due()
    run = WorkflowRun.objects.get()
    assert (run.status, run.item_id, run.reason) == ("not_run", None, "not run: item 424242 does not exist.")


def test_a_deleted_workflow_loses_its_schedule(make_item, make_workflow, clock):
    workflow_id = _scheduled(make_workflow, make_item())
    scheduler.schedules_sync()
    workflows.delete(workflow_id, user="alice")
    assert scheduler.schedules_sync() == 0
    assert not WorkflowSchedule.objects.exists()


def test_a_changed_interval_applies_from_the_next_run(make_item, make_workflow, clock):
    item = make_item()
    workflow_id = _scheduled(make_workflow, item)
    scheduler.schedules_run_due()
    workflows.update(
        workflow_id, {"name": "checks", "steps": ["true"], "item_id": str(item.pk), "every_seconds": 10}, user="alice"
    )
    scheduler.schedules_sync()
    assert WorkflowSchedule.objects.get().every_seconds == 10


def test_a_due_run_is_claimed_once(make_item, make_workflow, clock):
    _scheduled(make_workflow, make_item())
    scheduler.schedules_sync()
    assert scheduler.schedule_claim_due() is not None
    assert scheduler.schedule_claim_due() is None


def test_the_worker_pass_starts_due_workflows(make_item, make_workflow, clock):
    _scheduled(make_workflow, make_item())
    assert worker_pass().workflows.started == 1


def test_the_worker_command_reports_scheduled_runs(make_item, make_workflow, clock, capsys):
    _scheduled(make_workflow, make_item())
    call_command("worker", "--once")
    assert "workflows started 1, not run 0" in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)
def test_two_workers_on_postgresql_never_claim_the_same_due_run(make_item, make_workflow, clock):
    if connection.vendor != "postgresql":
        pytest.skip("SKIP LOCKED is a PostgreSQL feature; SQLite is covered by the compare-and-set test above")
    _scheduled(make_workflow, make_item())
    scheduler.schedules_sync()
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
    assert claims == [None]
    assert scheduler.schedule_claim_due() is not None

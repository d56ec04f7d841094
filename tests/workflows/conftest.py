"""Workflow fixtures: private workspaces and items, and workflow definitions on the generated resource."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.workspace.conftest import make_item, workspace_dirs  # noqa: F401 - shared fixtures
from workspace.generated import workflows
from workspace.workflows.scheduler import schedules_enqueue_due


@pytest.fixture
def make_workflow(db: None) -> Callable[..., str]:
    """Stores a workflow definition as alice would through /api/v1/workflow; returns its id."""

    def build(steps: list[str], *, name: str = "checks", user: str = "alice", **fields: object) -> str:
        return workflows.create({"name": name, "steps": steps, **fields}, user=user)["resource_id"]

    return build


@dataclass(frozen=True)
class SchedulerTick:
    scheduled: int
    started: int
    not_run: int


@pytest.fixture
def scheduler_tick(run_tasks: Callable[[], list[Any]]) -> Callable[[], SchedulerTick]:
    """One scheduler pass as the worker runs it: enqueue the due windows, then run their tasks."""

    def tick() -> SchedulerTick:
        report = schedules_enqueue_due()
        statuses = [ran.detail for ran in run_tasks() if ran.task_name == "scheduled_workflow_run_task"]
        not_run = statuses.count("not_run")
        return SchedulerTick(scheduled=report.scheduled, started=len(statuses) - not_run, not_run=not_run)

    return tick

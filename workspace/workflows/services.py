"""Workflow writes: definitions changed through the `/api/v1` policy, and runs of their steps in an
item's sandbox, recorded (or the reason they could not start)."""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max

from collab import clock
from collab.actor import Actor, actor_now
from collab.errors import DomainError, Forbidden, Invalid, NotFound, Unavailable
from collab.slots import slot_held
from crudgen.metadata import ResourceMeta
from workspace.items import lifecycle
from workspace.items.access import can_view
from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import Item
from workspace.sandboxes.base import CommandInvalid, validate_command
from workspace.workflows.access import usable_item
from workspace.workflows.definitions import WorkflowDefinition, workflow_caller, workflow_definition
from workspace.workflows.generated import workflows
from workspace.workflows.models import WorkflowRun
from workspace.workflows.rules import steps_problem

logger = logging.getLogger(__name__)
QUOTA_REFUSAL = "sandbox_quota_exceeded"
OUTPUT_LIMIT = 20_000
Status = WorkflowRun.Status


def _checked_steps(definition: WorkflowDefinition) -> list[str]:
    if not definition.steps:
        raise Invalid(error="workflow_empty", detail=f"Workflow {definition.name!r} has no steps.")
    # A definition stored before the limit (or under a higher one) is refused here, not run.
    if problem := steps_problem(list(definition.steps)):
        raise Invalid(error="too_many_steps", detail=f"Workflow {definition.name!r}: {problem}.")
    for number, step in enumerate(definition.steps, start=1):
        try:
            validate_command(step)
        except CommandInvalid as exc:
            raise Invalid(error="invalid_workflow_step", detail=f"Step {number} cannot run: {exc}") from exc
    return list(definition.steps)


# Definitions. Each write is the generated route's own (crudgen's SingleModelCRUD) with the same
# access policy bound to the person, so a page can store nothing the API would refuse: a crudgen
# error (404 someone else's, 410 deleted, 412 a stale If-Match, 422 a schedule, 400 an item) is
# raised before anything is stored.


@transaction.atomic
def workflow_create(*, data: dict[str, Any], actor: Actor) -> ResourceMeta:
    return workflows.create_meta(data, user=actor.user_id, caller=workflow_caller(actor=actor))


@transaction.atomic
def workflow_update(*, workflow_id: str, data: dict[str, Any], if_match: str | None, actor: Actor) -> ResourceMeta:
    """Replaces the data (PUT); `if_match` names the revision the person edited, so a save over a
    newer revision is refused (412) instead of undoing it. Identical data stores no revision."""
    caller = workflow_caller(actor=actor)
    return workflows.update_meta(workflow_id, data, user=actor.user_id, if_match=if_match, caller=caller)


@transaction.atomic
def workflow_switch(*, workflow_id: str, revision_id: str, if_match: str | None, actor: Actor) -> ResourceMeta:
    """Makes an earlier revision current (a rollback); the history stays as it is."""
    caller = workflow_caller(actor=actor)
    return workflows.switch_meta(workflow_id, revision_id, user=actor.user_id, if_match=if_match, caller=caller)


@transaction.atomic
def workflow_delete(*, workflow_id: str, actor: Actor) -> ResourceMeta:
    """Soft delete: the schedule stops at the next pass; revisions and runs stay, and it can be restored."""
    caller = workflow_caller(actor=actor)
    return workflows.delete_meta(workflow_id, user=actor.user_id, caller=caller)


@transaction.atomic
def workflow_restore(*, workflow_id: str, actor: Actor) -> ResourceMeta:
    caller = workflow_caller(actor=actor)
    return workflows.restore_meta(workflow_id, user=actor.user_id, caller=caller)


def workflow_run_gate(*, item: Item, app: AppDescriptor) -> None:
    """THE admission gate of workflow execution (spec "Limits" 7-8), before a run is recorded.

    Opening the item's sandbox goes through admission, which refuses a new sandbox over quota
    with 507 `sandbox_quota_exceeded` (503 when the backend is unreachable).
    """
    lifecycle.sandbox_for_item(item=item, app=app)


@transaction.atomic
def _run_record(
    *,
    definition: WorkflowDefinition | None,
    workflow_id: str,
    item: Item | None,
    trigger: str,
    status: str,
    user_id: str,
    reason: str = "",
) -> WorkflowRun:
    moment = clock.now()
    run = WorkflowRun(
        workflow_id=workflow_id,
        revision_id=definition.revision_id if definition else "",
        item=item,
        trigger=trigger,
        status=status,
        reason=reason,
        started_at=moment if status == Status.RUNNING else None,
        finished_at=None if status == Status.RUNNING else moment,
    )
    run.stamp_created(user_id)
    run_numbered_save(run)
    return run


def run_numbered_save(run: WorkflowRun) -> None:
    """Saves a new run as the next of its workflow's runs. Two runs of one workflow started at
    the same moment may read the same last number: the unique (workflow, number) refuses the
    second, which takes the next one."""
    for _attempt in range(5):
        last = WorkflowRun.objects.filter(workflow_id=run.workflow_id).aggregate(last=Max("number"))["last"]
        run.number = (last or 0) + 1
        try:
            with transaction.atomic():
                run.save(force_insert=True)
            return
        except IntegrityError:
            if not WorkflowRun.objects.filter(workflow_id=run.workflow_id, number=run.number).exists():
                raise  # some other rule refused it (one record per schedule window)
    raise Unavailable(error="busy", detail="Too many runs of this workflow started at once; try again.")


def _clip(text: str) -> str:
    return text if len(text) <= OUTPUT_LIMIT else text[:OUTPUT_LIMIT] + "\n… (output clipped)"


def _overran(number: int, *, during: bool) -> str:
    limit = settings.WORKSPACE_WORKFLOW_MAX_RUN_SECONDS
    return f"Stopped {'during' if during else 'before'} step {number}: a run may take at most {limit:g} s."


def _execute(run: WorkflowRun, *, item: Item, app: AppDescriptor, steps: list[str]) -> WorkflowRun:
    """Runs the steps in order and stops at the first that fails; each step's result is kept.

    The whole run has WORKSPACE_WORKFLOW_MAX_RUN_SECONDS (real time, as it bounds how long a thread
    is held): each step may use at most what is left, and a run past it is stopped, saying so.
    """
    step_timeout = get_config().sandbox.exec_timeout
    deadline = time.monotonic() + settings.WORKSPACE_WORKFLOW_MAX_RUN_SECONDS
    results: list[dict] = []
    status, reason = Status.SUCCEEDED, ""
    for number, step in enumerate(steps, start=1):
        left = deadline - time.monotonic()
        if left <= 0:
            status, reason = Status.FAILED, _overran(number, during=False)
            break
        timeout = min(step_timeout, left)
        try:
            outcome = lifecycle.sandbox_exec(item=item, app=app, command=step, timeout=timeout)
        except DomainError as exc:
            status, reason = Status.FAILED, f"Step {number} could not run: {exc.detail}"
            break
        result = outcome.result
        results.append(
            {
                "command": step,
                "exit_code": result.exit_code,
                "stdout": _clip(result.stdout),
                "stderr": _clip(result.stderr),
                "timed_out": result.timed_out,
                "duration_ms": result.duration_ms,
            }
        )
        if result.timed_out and timeout < step_timeout:
            status, reason = Status.FAILED, _overran(number, during=True)
            break
        if result.exit_code != 0 or result.timed_out:
            status, reason = Status.FAILED, f"Step {number} exited with {result.exit_code}."
            break
    run.steps, run.status, run.reason, run.finished_at = results, status, reason, clock.now()
    run.save(update_fields=["steps", "status", "reason", "finished_at"])
    return run


def creator_may_use(definition: WorkflowDefinition, item: Item) -> bool:
    """A run acts for the workflow's creator: they must still be a user and still see the item."""
    creator = actor_now(definition.created_by)
    return creator is not None and can_view(item, actor=creator)


def _creator_checked(definition: WorkflowDefinition, item: Item) -> None:
    if not creator_may_use(definition, item):
        raise Forbidden(
            error="workflow_creator_lacks_access",
            detail=(
                f"Workflow {definition.name!r} acts for {definition.created_by or 'nobody'}, "
                f"who may not use item {item.pk}."
            ),
        )


def workflow_run(*, item: Item, app: AppDescriptor, workflow_id: str, actor: Actor) -> WorkflowRun:
    """A manual run of the workflow's current revision on `item`, acting for the workflow's creator.

    Refused before anything is recorded: a workflow the caller may not see or that does not exist
    (404), deleted (410), a creator who may not use the item (403), no, bad or too many steps
    (400), the caller's command slots all taken (429), and the gate (507 over quota, 503 backend
    down), so a refused run leaves no record. The run records who pressed run and holds one of
    their command slots. Not one transaction: steps run for seconds; the row shows `running` meanwhile.
    """
    definition = workflow_definition(workflow_id, actor=actor)
    _creator_checked(definition, item)
    steps = _checked_steps(definition)
    with slot_held(user_id=actor.user_id, seconds=settings.WORKSPACE_WORKFLOW_MAX_RUN_SECONDS):
        workflow_run_gate(item=item, app=app)
        run = _run_record(
            definition=definition, workflow_id=definition.id, item=item,
            trigger=WorkflowRun.Trigger.MANUAL, status=Status.RUNNING, user_id=actor.user_id,
        )  # fmt: skip
        return _execute(run, item=item, app=app, steps=steps)


def workflow_run_on_item(*, workflow_id: str, item_id: object, actor: Actor) -> WorkflowRun:
    """A manual run on an item named by id (the workflow page's "Run now"): the same refusals as
    `workflow_run`, and an item the caller may not use is the 404 of a missing one."""
    if not str(item_id).strip():
        raise Invalid(error="item_required", detail="Choose the item to run the workflow on.")
    item = usable_item(item_id, actor=actor)
    if item is None:
        raise NotFound(error="item_not_found", detail=f"There is no item {str(item_id)[:40]}.")
    return workflow_run(item=item, app=_app_of(item), workflow_id=workflow_id, actor=actor)


def not_run_reason(exc: DomainError) -> str:
    if exc.error == QUOTA_REFUSAL:
        return f"not run due to quota: {exc.detail}"
    return f"not run: {exc.detail}"


def _app_of(item: Item) -> AppDescriptor:
    app = get_config().app(item.app_slug)
    if app is None:
        raise NotFound(error="unknown_app", detail=f"The app {item.app_slug!r} no longer exists.")
    return app


def _window_record(
    *,
    definition: WorkflowDefinition | None,
    workflow_id: str,
    item: Item | None,
    window_at: datetime,
    status: str,
    reason: str = "",
) -> WorkflowRun:
    """The one record of a schedule window, written or rewritten: a retried task never adds a second."""
    moment = clock.now()
    values: dict = {
        "item": item,
        "trigger": WorkflowRun.Trigger.SCHEDULED,
        "status": status,
        "reason": reason,
        "steps": [],
        "started_at": moment if status == Status.RUNNING else None,
        "finished_at": None if status == Status.RUNNING else moment,
    }
    if definition is not None:
        values["revision_id"] = definition.revision_id
    with transaction.atomic():
        run = WorkflowRun.objects.select_for_update().filter(workflow_id=workflow_id, window_at=window_at).first()
        if run is None:
            run = WorkflowRun(workflow_id=workflow_id, window_at=window_at, **values)
            run.stamp_created(definition.created_by if definition else "")
            run_numbered_save(run)
        else:
            for field, value in values.items():
                setattr(run, field, value)
            run.save()
    return run


def scheduled_run(*, workflow_id: str, item_id: int, window_at: datetime) -> WorkflowRun:
    """A headless run of one schedule window; what stops it from starting becomes a `not_run` record.

    The run acts for the workflow's creator (docs/ARCHITECTURE.md §3: work off the request path gets its
    user), whose access to the item is checked again now: a creator who lost it gets a `not_run`
    record saying so, and nothing runs. A window has one record: run again (its task is retried
    after the worker died), a finished window is left as it is and a `running` one is run anew in
    the same record.
    """
    finished = (
        WorkflowRun.objects.filter(workflow_id=workflow_id, window_at=window_at).exclude(status=Status.RUNNING).first()
    )
    if finished is not None:
        return finished
    item = Item.objects.filter(pk=item_id).first()
    definition: WorkflowDefinition | None = None
    try:
        definition = workflow_definition(workflow_id)
        if item is None:
            raise NotFound(error="item_not_found", detail=f"item {item_id} does not exist.")
        _creator_checked(definition, item)
        steps = _checked_steps(definition)
        app = _app_of(item)
        workflow_run_gate(item=item, app=app)
    except DomainError as exc:
        logger.info("scheduled workflow %s on item %s not run: %s", workflow_id, item_id, exc.detail)
        return _window_record(
            definition=definition, workflow_id=workflow_id, item=item, window_at=window_at,
            status=Status.NOT_RUN, reason=not_run_reason(exc),
        )  # fmt: skip
    run = _window_record(
        definition=definition, workflow_id=workflow_id, item=item, window_at=window_at, status=Status.RUNNING
    )
    return _execute(run, item=item, app=app, steps=steps)


def scheduled_run_given_up(*, workflow_id: str, item_id: int, window_at: datetime, reason: str) -> WorkflowRun:
    """The window's record says the run failed for good (the worker's last attempt)."""
    return _window_record(
        definition=None,
        workflow_id=workflow_id,
        item=Item.objects.filter(pk=item_id).first(),
        window_at=window_at,
        status=Status.FAILED,
        reason=reason,
    )

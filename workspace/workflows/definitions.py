"""Reading workflow definitions: the current revision of the generated `workflow` resource."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from collab.actor import Actor
from collab.errors import Gone, NotFound
from crudgen import Caller, ListQueryParams, NotFoundError, SortOrder
from crudgen.storage.base import Stored
from workspace.workflows.generated import workflows
from workspace.workflows.rules import item_pk, schedule_problem

_PAGE = 500
REVISIONS_PAGE_SIZE = 20
WORKFLOWS_PAGE_SIZE = 25


@dataclass(frozen=True)
class WorkflowDefinition:
    id: str
    revision_id: str
    name: str
    steps: tuple[str, ...]
    description: str
    item_id: str | None
    every_seconds: int | None
    enabled: bool
    created_by: str
    is_deleted: bool = False
    created_time: datetime | None = None
    updated_time: datetime | None = None
    updated_by: str = ""

    @property
    def scheduled_item_id(self) -> int | None:
        """The item a schedule runs on, when the workflow names one that can be an item id."""
        return item_pk(self.item_id)

    @property
    def is_scheduled(self) -> bool:
        """Enabled, with an item and a valid interval. A definition stored before the interval rule
        (`every_seconds` of 0, or past a month) is simply not scheduled: it must never stop the
        scheduler of everyone else."""
        return self.enabled and schedule_problem(self.every_seconds) is None and self.scheduled_item_id is not None


def _definition(stored: Stored) -> WorkflowDefinition:
    data = stored.data
    return WorkflowDefinition(
        id=stored.meta.resource_id,
        revision_id=stored.meta.current_revision_id,
        created_by=stored.meta.created_by or "",
        name=str(data.get("name", "")),
        steps=tuple(str(step) for step in data.get("steps") or ()),
        description=str(data.get("description") or ""),
        item_id=None if data.get("item_id") is None else str(data["item_id"]),
        every_seconds=data.get("every_seconds"),
        enabled=bool(data.get("enabled", True)),
        is_deleted=stored.meta.is_deleted,
        created_time=stored.meta.created_time,
        updated_time=stored.meta.updated_time,
        updated_by=stored.meta.updated_by or "",
    )


def _not_found(workflow_id: str) -> NotFound:
    return NotFound(error="workflow_not_found", detail=f"There is no workflow {workflow_id}.")


def workflow_definition(workflow_id: str, *, actor: Actor | None = None) -> WorkflowDefinition:
    """The current revision; an unknown id is 404, a deleted workflow 410 with a clear reason.

    With `actor` (a person asking), someone else's workflow is the same 404 as a missing one,
    deleted or not; without it (the scheduler) every workflow is found.
    """
    try:
        stored = workflows.read(workflow_id, caller=None if actor is None else workflow_caller(actor=actor))
    except NotFoundError as exc:
        raise _not_found(workflow_id) from exc
    if stored.meta.is_deleted:
        raise Gone(
            error="workflow_deleted",
            detail=f"Workflow {workflow_id} was deleted, so it cannot run; restore it first.",
        )
    return _definition(stored)


def workflow_creator(workflow_id: str) -> str:
    """Whom a workflow's runs act for (its creator); blank for one that does not exist."""
    try:
        return workflows.read(workflow_id).meta.created_by or ""
    except NotFoundError:
        return ""


def live_definitions() -> Iterator[WorkflowDefinition]:
    """Every workflow that is not deleted, page by page (the scheduler's scan)."""
    page = 1
    while True:
        stored, total = workflows.list_stored(
            ListQueryParams(page=page, page_size=_PAGE, sort_by="created_time", sort_order=SortOrder.ASC)
        )
        for row in stored:
            yield _definition(row)
        if page * _PAGE >= total or not stored:
            return
        page += 1


def recent_definitions(*, actor: Actor, limit: int = 20) -> list[WorkflowDefinition]:
    """The newest workflows the viewer may see (their own; staff see all), in one indexed query."""
    scope = workflow_scope(actor=actor)
    stored, _total = workflows.list_stored(ListQueryParams(page=1, page_size=limit), scope=scope)
    return [_definition(row) for row in stored]


def workflow_caller(*, actor: Actor) -> Caller:
    """The `/api/v1/workflow` access policy bound to `actor`.

    Pages, services and scheduled runs pass it to every read and write of a definition, so they
    refuse exactly what the generated routes refuse: someone else's workflow is a 404, an item the
    person may not use and a schedule outside its bounds are refused before anything is stored.
    """
    return workflows.caller_for(actor)


def workflow_scope(*, actor: Actor) -> Any:
    """The scope of a workflow list, in SQL (crudgen's, from the policy): the actor's own; staff list all."""
    return workflow_caller(actor=actor).scope()


def workflow_for(workflow_id: str, *, actor: Actor) -> WorkflowDefinition:
    """The current revision, deleted or not; someone else's workflow is the 404 of a missing one."""
    try:
        stored = workflows.read(workflow_id, caller=workflow_caller(actor=actor))
    except NotFoundError as exc:
        raise _not_found(workflow_id) from exc
    return _definition(stored)


@dataclass(frozen=True)
class DefinitionPage:
    definitions: list[WorkflowDefinition]
    total: int
    page: int
    has_next: bool


def definitions_page(*, actor: Actor, page: int = 1, deleted: bool = False) -> DefinitionPage:
    """One page of the workflows the person may list (the API's scope, in SQL), newest first."""
    scope = workflow_scope(actor=actor)
    params = ListQueryParams(page=page, page_size=WORKFLOWS_PAGE_SIZE)
    stored, total = workflows.list_stored(params, is_deleted=deleted, scope=scope)
    return DefinitionPage(
        definitions=[_definition(row) for row in stored],
        total=total,
        page=page,
        has_next=params.offset + len(stored) < total,
    )


@dataclass(frozen=True)
class WorkflowRevision:
    revision_id: str
    created_by: str
    created_time: datetime | None
    is_current: bool


@dataclass(frozen=True)
class RevisionPage:
    revisions: list[WorkflowRevision]
    total: int
    page: int
    has_next: bool
    has_prev: bool


def _revision(view: dict[str, Any]) -> WorkflowRevision:
    created = view.get("created_time")
    return WorkflowRevision(
        revision_id=view["revision_id"],
        created_by=view.get("created_by") or "",
        created_time=datetime.fromisoformat(created) if created else None,
        is_current=bool(view["is_current"]),
    )


def revisions_page(workflow_id: str, *, actor: Actor, page: int = 1) -> RevisionPage:
    """The workflow's revisions, newest first, through the route's own read (`revision-list`)."""
    caller = workflow_caller(actor=actor)
    try:
        listed = workflows.list_revisions(workflow_id, page, REVISIONS_PAGE_SIZE, caller=caller)
    except NotFoundError as exc:
        raise _not_found(workflow_id) from exc
    return RevisionPage(
        revisions=[_revision(view) for view in listed.items],
        total=listed.total,
        page=listed.page,
        has_next=listed.has_next,
        has_prev=listed.has_prev,
    )


@dataclass(frozen=True)
class RevisionData:
    revision: WorkflowRevision
    data: dict[str, Any]


def revision_for(workflow_id: str, revision_id: str, *, actor: Actor) -> RevisionData:
    """One revision's data and who wrote it when; an unknown revision is a 404 like an unknown workflow."""
    caller = workflow_caller(actor=actor)
    try:
        found = workflows.get_revision(workflow_id, revision_id, caller=caller)
    except NotFoundError as exc:
        raise NotFound(
            error="revision_not_found", detail=f"Workflow {workflow_id} has no revision {revision_id}."
        ) from exc
    return RevisionData(revision=_revision(found["revision_info"]), data=found["data"])

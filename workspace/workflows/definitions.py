"""Reading workflow definitions: the current revision of the generated `workflow` resource."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from collab.errors import ApiError
from crudgen import ListQueryParams, NotFoundError, ResourceDeletedError, SortOrder
from workspace.generated import workflows

_PAGE = 500


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

    @property
    def scheduled_item_id(self) -> int | None:
        """The item a schedule runs on, when the workflow names one that can be an item id."""
        raw = (self.item_id or "").strip()
        return int(raw) if raw.isdigit() else None

    @property
    def is_scheduled(self) -> bool:
        return (
            self.enabled and bool(self.every_seconds and self.every_seconds > 0) and self.scheduled_item_id is not None
        )


def _definition(resource_id: str, revision_id: str, data: dict) -> WorkflowDefinition:
    return WorkflowDefinition(
        id=resource_id,
        revision_id=revision_id,
        name=str(data.get("name", "")),
        steps=tuple(str(step) for step in data.get("steps") or ()),
        description=str(data.get("description") or ""),
        item_id=None if data.get("item_id") is None else str(data["item_id"]),
        every_seconds=data.get("every_seconds"),
        enabled=bool(data.get("enabled", True)),
    )


def workflow_definition(workflow_id: str) -> WorkflowDefinition:
    """The current revision; an unknown id is 404, a deleted workflow 410 with a clear reason."""
    try:
        stored = workflows.read_live(workflow_id)
    except NotFoundError as exc:
        raise ApiError(
            status_code=404, error="workflow_not_found", detail=f"There is no workflow {workflow_id}."
        ) from exc
    except ResourceDeletedError as exc:
        raise ApiError(
            status_code=410,
            error="workflow_deleted",
            detail=f"Workflow {workflow_id} was deleted, so it cannot run; restore it first.",
        ) from exc
    return _definition(stored.meta.resource_id, stored.meta.current_revision_id, stored.data)


def live_definitions() -> Iterator[WorkflowDefinition]:
    """Every workflow that is not deleted, page by page (the scheduler's scan)."""
    page = 1
    while True:
        stored, total = workflows.list_stored(
            ListQueryParams(page=page, page_size=_PAGE, sort_by="created_time", sort_order=SortOrder.ASC)
        )
        for row in stored:
            yield _definition(row.meta.resource_id, row.meta.current_revision_id, row.data)
        if page * _PAGE >= total or not stored:
            return
        page += 1


def recent_definitions(*, limit: int = 20) -> list[WorkflowDefinition]:
    stored, _total = workflows.list_stored(ListQueryParams(page=1, page_size=limit))
    return [_definition(row.meta.resource_id, row.meta.current_revision_id, row.data) for row in stored]

"""Who may see, change and run a workflow (docs/ARCHITECTURE.md §7 "Access"): its creator and staff.

The generated `/api/v1/workflow` routes ask `WorkflowAccess` (crudgen's access hook): lists are
scoped to the caller's own workflows in SQL, every other route answers 404 for someone else's,
and an `item_id` must name an item the caller may use. Runs act for the workflow's creator and
check the creator's access to the item when they start. Data it refuses is refused with our domain
errors (`DATA_REFUSALS`), mapped to a status once, at the edge.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from collab.actor import Actor
from collab.errors import DomainError, Invalid, Unprocessable
from crudgen import Actor as PolicyActor
from crudgen import CreatorOnly
from workspace.items.access import can_view
from workspace.items.models import Item
from workspace.workflows.rules import (
    SCHEDULE_MAX_SECONDS,
    SCHEDULE_MIN_SECONDS,
    item_pk,
    schedule_problem,
    steps_problem,
)

# What `check_data` refuses with: an item the caller may not use is a bad request, a schedule or
# steps out of bounds a value the resource does not take (crudgen's contract: 422).
DATA_REFUSALS: tuple[type[DomainError], ...] = (Invalid, Unprocessable)


def usable_item(raw: object, *, actor: Actor) -> Item | None:
    """The item `raw` names if `actor` may use it (see it, and so run in it); else None."""
    pk = item_pk(raw)
    if pk is None:
        return None
    item = Item.objects.filter(pk=pk).first()
    if item is None or not can_view(item, actor=actor):
        return None
    return item


def _is_staff(actor: PolicyActor) -> bool:
    return bool(actor.is_staff)


def _ours(actor: PolicyActor) -> Actor:
    """The service's actor for crudgen's (a route's `PlainActor`, or ours passed through)."""
    return actor if isinstance(actor, Actor) else Actor(actor.user_id or "", bool(actor.is_staff))


class WorkflowAccess(CreatorOnly):
    """crudgen's policy for workflows. `data_refusal_statuses`: the statuses the edge gives
    `DATA_REFUSALS`, for the OpenAPI document (the routes' wiring passes them: `generated.py`)."""

    def __init__(self, *, data_refusal_statuses: tuple[int, ...] = ()) -> None:
        super().__init__(sees_everything=_is_staff)
        self.data_refusal_statuses = data_refusal_statuses

    @property
    def data_field_schemas(self) -> dict[str, dict[str, Any]]:  # type: ignore[override]
        """What `check_data` refuses, for the document: the interval's bounds and the most steps."""
        every = {"type": "integer", "minimum": SCHEDULE_MIN_SECONDS, "maximum": SCHEDULE_MAX_SECONDS}
        return {
            "every_seconds": {"anyOf": [every, {"type": "null"}]},
            "steps": {"maxItems": settings.WORKSPACE_WORKFLOW_MAX_STEPS},
        }

    def check_data(self, actor: PolicyActor, data: dict[str, Any]) -> None:
        if problem := steps_problem(data.get("steps")):
            raise Unprocessable(error="too_many_steps", detail=f"steps: {problem}.", fields={"steps": problem})
        every_seconds = data.get("every_seconds")
        if every_seconds is not None and (problem := schedule_problem(every_seconds)):
            raise Unprocessable(
                error="invalid_schedule", detail=f"every_seconds {problem}.", fields={"every_seconds": problem}
            )
        raw = data.get("item_id")
        if raw is None or not str(raw).strip():
            return
        if usable_item(raw, actor=_ours(actor)) is None:
            raise Invalid(
                error="invalid_item_id",
                detail=f"item_id {str(raw)[:40]!r} does not name an item you may use.",
                fields={"item_id": "no such item, or not yours"},
            )

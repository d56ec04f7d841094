"""Reads of workflows for their pages: runs, the newest run of each workflow, the items a form
offers, and a revision compared with the current one."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from collab.actor import Actor
from workspace.items.access import usable_item_ids
from workspace.items.config import get_config
from workspace.items.models import Item
from workspace.workflows.definitions import RevisionData, WorkflowDefinition, WorkflowRevision
from workspace.workflows.models import WorkflowRun
from workspace.workflows.rules import item_pk, schedule_text

RUNS_LIMIT = 50
ITEM_CHOICES_LIMIT = 200
# Steps per side up to which a comparison is a line diff; past it, steps are compared by place.
STEP_DIFF_LIMIT = 500


def runs_of_workflow(*, workflow_id: str, item_id: int | None = None, limit: int = RUNS_LIMIT) -> list[WorkflowRun]:
    """Newest first, with their items; scheduled failure records included (they are the point of the list)."""
    rows = WorkflowRun.objects.filter(workflow_id=workflow_id)
    if item_id is not None:
        rows = rows.filter(item_id=item_id)
    return list(rows.select_related("item").order_by("-id")[:limit])


def last_runs(workflow_ids: Sequence[str]) -> dict[str, WorkflowRun]:
    """The newest run of each workflow, in one query of one `workflow_run_idx` probe per workflow.

    A GROUP BY would read every run the workflows ever had (a minutely schedule leaves 44,640 a
    month), and the same probes built as ORM subqueries take longer to compile than to run
    (bench/workflow_pages.py).
    """
    if not workflow_ids:
        return {}
    table = connection.ops.quote_name(WorkflowRun._meta.db_table)
    probe = f"SELECT (SELECT id FROM {table} WHERE workflow_id = %s ORDER BY id DESC LIMIT 1)"
    newest = " UNION ALL ".join([probe] * len(workflow_ids))
    runs = WorkflowRun.objects.raw(f"SELECT * FROM {table} WHERE id IN ({newest})", list(workflow_ids))
    return {run.workflow_id: run for run in runs}


def items_for_viewer(raw_ids: Iterable[object], *, actor: Actor) -> dict[str, Item]:
    """The items these ids name (as a definition stores them: strings) that the person may see,
    keyed by that string; an item they may not see is left out, so its title is never shown."""
    wanted = {str(raw).strip(): pk for raw in raw_ids if (pk := item_pk(raw)) is not None}
    rows = {item.pk: item for item in Item.objects.filter(pk__in=set(wanted.values()))} if wanted else {}
    viewable = usable_item_ids(rows.values(), actor=actor)
    return {raw: rows[pk] for raw, pk in wanted.items() if pk in viewable}


@dataclass(frozen=True)
class ItemChoice:
    value: str
    label: str


@dataclass(frozen=True)
class ItemChoiceGroup:
    label: str
    choices: list[ItemChoice]


def item_choices(*, actor: Actor, named: Iterable[object] = ()) -> list[ItemChoiceGroup]:
    """What an item field offers: the person's own newest items of the configured apps, by app,
    plus each `named` id (the current value, an item the page was opened from). A named item they
    may use joins its app; one they may not is offered by its id only, so saving the form never
    drops it silently (the save is refused and says why) and its title is not shown."""
    apps = get_config().apps
    own = list(
        Item.objects.filter(app_slug__in=list(apps), created_by=actor.user_id).order_by("-pk")[:ITEM_CHOICES_LIMIT]
    )
    offered = {str(item.pk) for item in own}
    extra_ids = list(dict.fromkeys(text for raw in named if (text := str(raw or "").strip()) and text not in offered))
    usable = items_for_viewer(extra_ids, actor=actor)
    by_app: dict[str, list[ItemChoice]] = {}
    for item in [*usable.values(), *own]:
        by_app.setdefault(item.app_slug, []).append(ItemChoice(str(item.pk), f"{item.title} (#{item.pk})"))
    groups = [ItemChoiceGroup(apps[slug].name if slug in apps else slug, options) for slug, options in by_app.items()]
    unavailable = [ItemChoice(raw, f"item {raw[:40]}") for raw in extra_ids if raw not in usable]
    if unavailable:
        groups.append(ItemChoiceGroup("Not available to you", unavailable))
    return groups


# -- a revision compared with the current one ---------------------------------------------------


@dataclass(frozen=True)
class FieldChange:
    label: str
    current: str
    other: str


@dataclass(frozen=True)
class StepLine:
    """One step of the comparison: "-" only in the current revision, "+" only in the other, " " both."""

    mark: str
    text: str


@dataclass(frozen=True)
class RevisionComparison:
    revision: WorkflowRevision
    current_revision_id: str
    changes: list[FieldChange]
    steps: list[StepLine]

    @property
    def steps_changed(self) -> bool:
        return any(line.mark != " " for line in self.steps)

    @property
    def identical(self) -> bool:
        return not self.changes and not self.steps_changed


def _item_text(raw: object, items: dict[str, Item]) -> str:
    if raw is None or not str(raw).strip():
        return "none"
    item = items.get(str(raw).strip())
    return f"{item.title} (#{item.pk})" if item else f"item {str(raw)[:40]}"


def _shown_fields(data: dict[str, Any], items: dict[str, Item]) -> dict[str, str]:
    return {
        "Name": str(data.get("name") or ""),
        "Description": str(data.get("description") or ""),
        "Item": _item_text(data.get("item_id"), items),
        "Schedule": schedule_text(data.get("every_seconds")) or "none (runs when started)",
        "Enabled": "yes" if data.get("enabled", True) else "no",
    }


def step_lines(current: Sequence[str], other: Sequence[str]) -> list[StepLine]:
    """Every step of both, in order, marked by where it is: a line diff of the two step lists.

    A line diff costs about the square of the steps (a few thousand steps held a worker for
    seconds, bench/workflow_pages.py), so past STEP_DIFF_LIMIT steps on a side each step is
    compared with the one at its place instead.
    """
    if max(len(current), len(other)) > STEP_DIFF_LIMIT:
        return _steps_by_place(current, other)
    lines: list[StepLine] = []
    matcher = difflib.SequenceMatcher(a=list(current), b=list(other), autojunk=False)
    for tag, a_start, a_end, b_start, b_end in matcher.get_opcodes():
        if tag == "equal":
            lines += [StepLine(" ", step) for step in current[a_start:a_end]]
            continue
        lines += [StepLine("-", step) for step in current[a_start:a_end]]
        lines += [StepLine("+", step) for step in other[b_start:b_end]]
    return lines


def _steps_by_place(current: Sequence[str], other: Sequence[str]) -> list[StepLine]:
    lines: list[StepLine] = []
    for place in range(max(len(current), len(other))):
        mine = current[place] if place < len(current) else None
        theirs = other[place] if place < len(other) else None
        if mine == theirs:
            lines.append(StepLine(" ", str(mine)))
            continue
        lines += [StepLine("-", mine)] if mine is not None else []
        lines += [StepLine("+", theirs)] if theirs is not None else []
    return lines


def revision_comparison(current: WorkflowDefinition, other: RevisionData, *, actor: Actor) -> RevisionComparison:
    """What switching to `other` would change in the current revision, field by field and step by step."""
    current_data = {
        "name": current.name,
        "description": current.description,
        "item_id": current.item_id,
        "every_seconds": current.every_seconds,
        "enabled": current.enabled,
    }
    items = items_for_viewer([current.item_id, other.data.get("item_id")], actor=actor)
    now, then = _shown_fields(current_data, items), _shown_fields(other.data, items)
    return RevisionComparison(
        revision=other.revision,
        current_revision_id=current.revision_id,
        changes=[FieldChange(label, now[label], then[label]) for label in now if now[label] != then[label]],
        steps=step_lines(current.steps, [str(step) for step in other.data.get("steps") or ()]),
    )

"""The workflow form of the pages: what a person typed, kept as typed, and the `/api/v1` body it stands for.

It only reads the fields (an interval of "1.5 hours" is 5400 seconds); every rule of what may be
stored is the API's, applied by the services.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.http import QueryDict

from collab.errors import Invalid
from workspace.workflows.definitions import WorkflowDefinition
from workspace.workflows.rules import SCHEDULE_UNITS, schedule_in_units

DEFAULT_UNIT = "hours"
# Digits with an optional fraction: no exponent, no sign, nothing a conversion could blow up on.
_AMOUNT = re.compile(r"\d{1,9}(\.\d{1,6})?")
_TEXT_FIELDS = ("name", "description")


class FormProblem(Invalid):
    """Fields that cannot be read as a workflow; `fields` maps each to its message, as the data
    refusals of `WorkflowAccess` do."""

    def __init__(self, fields: dict[str, str]) -> None:
        detail = "Some fields need a change before the workflow can be saved."
        super().__init__(error="invalid_form", detail=detail, fields=fields)
        self.fields = fields


@dataclass(frozen=True)
class WorkflowForm:
    name: str = ""
    description: str = ""
    steps: tuple[str, ...] = ()
    item_id: str = ""
    every: str = ""
    every_unit: str = DEFAULT_UNIT
    enabled: bool = True

    @classmethod
    def from_post(cls, post: QueryDict) -> WorkflowForm:
        return cls(
            name=post.get("name", ""),
            description=post.get("description", "").replace("\r\n", "\n"),
            steps=tuple(step.replace("\r\n", "\n") for step in post.getlist("steps")),
            item_id=post.get("item_id", "").strip(),
            every=post.get("every", "").strip(),
            every_unit=post.get("every_unit", DEFAULT_UNIT),
            enabled=post.get("enabled") == "on",
        )

    @classmethod
    def from_definition(cls, definition: WorkflowDefinition) -> WorkflowForm:
        every, unit = "", DEFAULT_UNIT
        if definition.every_seconds is not None:
            amount, unit = schedule_in_units(definition.every_seconds)
            every = str(amount)
        return cls(
            name=definition.name,
            description=definition.description,
            steps=definition.steps,
            item_id=definition.item_id or "",
            every=every,
            every_unit=unit,
            enabled=definition.enabled,
        )

    @property
    def filled_steps(self) -> list[str]:
        return [step.strip() for step in self.steps if step.strip()]

    def _every_seconds(self) -> int | None:
        if not self.every:
            return None
        unit = SCHEDULE_UNITS.get(self.every_unit)
        if unit is None:
            raise FormProblem({"every_seconds": f"the unit must be one of {', '.join(SCHEDULE_UNITS)}"})
        if not _AMOUNT.fullmatch(self.every):
            raise FormProblem({"every_seconds": "must be a number, such as 30 or 1.5"})
        seconds = Decimal(self.every) * unit
        if seconds != seconds.to_integral_value():
            raise FormProblem({"every_seconds": f"{self.every} {self.every_unit} is not a whole number of seconds"})
        return int(seconds)

    def data(self) -> dict[str, Any]:
        """The body `/api/v1/workflow` would take; FormProblem for what cannot be read as one."""
        typed = {name: getattr(self, name) for name in _TEXT_FIELDS}
        problems = {name: "cannot contain a NUL character" for name, value in typed.items() if "\x00" in value}
        if any("\x00" in step for step in self.steps):
            problems["steps"] = "cannot contain a NUL character"
        if problems:
            raise FormProblem(problems)
        return {
            "name": self.name.strip(),
            "description": self.description.strip(),
            "steps": self.filled_steps,
            "item_id": self.item_id or None,
            "every_seconds": self._every_seconds(),
            "enabled": self.enabled,
        }

"""The rules a workflow definition obeys wherever it is read or written."""

from __future__ import annotations

from django.conf import settings

from collab.converters import is_row_id

# A schedule runs at most once a minute (the worker's own rhythm) and at least once a month.
SCHEDULE_MIN_SECONDS = 60
SCHEDULE_MAX_SECONDS = 31 * 24 * 3600

# The units a person names an interval in, largest first (seconds per unit).
SCHEDULE_UNITS: dict[str, int] = {"days": 86_400, "hours": 3_600, "minutes": 60, "seconds": 1}


def schedule_problem(every_seconds: object) -> str | None:
    """Why `every_seconds` cannot be a schedule, or None when it can (an int within the bounds)."""
    if isinstance(every_seconds, bool) or not isinstance(every_seconds, int):
        return "must be a whole number of seconds"
    if not SCHEDULE_MIN_SECONDS <= every_seconds <= SCHEDULE_MAX_SECONDS:
        return f"must be between {SCHEDULE_MIN_SECONDS} and {SCHEDULE_MAX_SECONDS} seconds (1 minute to 31 days)"
    return None


def steps_problem(steps: object) -> str | None:
    """Why `steps` are too many for one workflow (WORKSPACE_WORKFLOW_MAX_STEPS), or None."""
    limit = settings.WORKSPACE_WORKFLOW_MAX_STEPS
    if isinstance(steps, list | tuple) and len(steps) > limit:
        return f"a workflow has at most {limit} steps ({len(steps)} given)"
    return None


def schedule_in_units(every_seconds: int) -> tuple[int, str]:
    """The interval in the largest unit that divides it exactly: 7200 is (2, "hours"), 90 is (90, "seconds")."""
    for unit, seconds in SCHEDULE_UNITS.items():
        if every_seconds and every_seconds % seconds == 0:
            return every_seconds // seconds, unit
    return every_seconds, "seconds"


def schedule_text(every_seconds: int | None) -> str:
    """An interval as a person reads it: "every 2 hours", "every minute"; "" when there is none."""
    if every_seconds is None:
        return ""
    amount, unit = schedule_in_units(every_seconds)
    return f"every {unit.removesuffix('s')}" if amount == 1 else f"every {amount} {unit}"


def item_pk(raw: object) -> int | None:
    """The item id a definition's `item_id` (a string) names, or None when it cannot name one."""
    text = str(raw if raw is not None else "").strip()
    return int(text) if text.isdigit() and len(text) <= 19 and is_row_id(int(text)) else None

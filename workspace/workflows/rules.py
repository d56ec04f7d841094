"""The rules a workflow definition obeys wherever it is read or written."""

from __future__ import annotations

# A schedule runs at most once a minute (the worker's own rhythm) and at least once a month.
SCHEDULE_MIN_SECONDS = 60
SCHEDULE_MAX_SECONDS = 31 * 24 * 3600


def schedule_problem(every_seconds: object) -> str | None:
    """Why `every_seconds` cannot be a schedule, or None when it can (an int within the bounds)."""
    if isinstance(every_seconds, bool) or not isinstance(every_seconds, int):
        return "must be a whole number of seconds"
    if not SCHEDULE_MIN_SECONDS <= every_seconds <= SCHEDULE_MAX_SECONDS:
        return f"must be between {SCHEDULE_MIN_SECONDS} and {SCHEDULE_MAX_SECONDS} seconds (31 days)"
    return None

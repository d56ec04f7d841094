"""Enqueueing background tasks (Django's Tasks framework; README "Background work") and what their failure means.

Every app enqueues through `enqueue`, so where a task row is written is decided once: with the
database backend on the service's own database the row is inserted in the caller's transaction
(it appears when the transaction commits, and vanishes with it when it rolls back, so no crash can
lose or orphan it); any other backend (a broker) is handed the task once the transaction commits.

`manage.py worker` runs the tasks. A task that raises is tried again after `retry_delay`; when the
worker gives up (the last attempt raised, or the worker running it died once too often) it calls
the recorder the task's app registered with `when_given_up`, so the object the task worked on says
why (a document `failed`, a run `failed`) instead of waiting forever.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, transaction
from django_tasks.base import Task
from django_tasks_db import DatabaseBackend

logger = logging.getLogger(__name__)

# Called with `reason=` and the task's own keyword arguments.
GiveUpRecorder = Callable[..., None]

_recorders: dict[str, GiveUpRecorder] = {}


def stored_with_the_transaction(task: Task) -> bool:
    """True when enqueueing writes a row in the service's database (the same transaction)."""
    return isinstance(task.get_backend(), DatabaseBackend) and transaction.get_connection().alias == DEFAULT_DB_ALIAS


def enqueue(task: Task, **kwargs: Any) -> None:
    """Enqueues `task(**kwargs)` so that it runs if and only if the caller's transaction commits."""
    if stored_with_the_transaction(task):
        task.enqueue(**kwargs)
    else:
        transaction.on_commit(lambda: task.enqueue(**kwargs))


def retry_delay(attempt: int) -> timedelta:
    """How long to wait after failed attempt `attempt`: doubling from the base, capped."""
    seconds = settings.WORKSPACE_TASK_RETRY_SECONDS * 2 ** max(attempt - 1, 0)
    return timedelta(seconds=min(seconds, settings.WORKSPACE_TASK_RETRY_MAX_SECONDS))


def when_given_up(task: Task, recorder: GiveUpRecorder) -> None:
    """Registers what to record when the worker gives up on `task` (at import of the task's module)."""
    _recorders[task.module_path] = recorder


def record_given_up(task_path: str, *, reason: str, kwargs: dict[str, Any]) -> None:
    """Runs the recorder of `task_path`, if any; a recorder that fails is logged, never raised, so
    the worker goes on."""
    recorder = _recorders.get(task_path)
    if recorder is None:
        return
    try:
        recorder(reason=reason, **kwargs)
    except Exception:
        logger.exception("Recording that %s was given up failed", task_path)

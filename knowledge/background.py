"""Where work started at the HTTP boundary runs: a worker thread, or a direct call in tests."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import connections

logger = logging.getLogger(__name__)

Work = Callable[[], None]
Runner = Callable[[Work], None]


def thread_runner(work: Work) -> None:
    """A daemon thread per job; the thread closes its own database connections when done."""

    def run() -> None:
        try:
            work()
        except Exception:
            logger.exception("Background work failed")
        finally:
            connections.close_all()

    threading.Thread(target=run, name="knowledge-background", daemon=True).start()


def direct_runner(work: Work) -> None:
    """Runs the work on the caller's thread: tests use it so ingest finishes before they look."""
    work()


_runner: Runner = thread_runner


def run_in_background(work: Work) -> None:
    _runner(work)


def set_runner(runner: Runner) -> None:
    global _runner
    _runner = runner


def reset_runner() -> None:
    set_runner(thread_runner)

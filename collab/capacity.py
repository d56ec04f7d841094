"""How much long work one app process takes on at once, for everyone together.

Each person may run WORKSPACE_EXEC_CONCURRENCY_PER_USER commands at once; these bounds sit on top
of that, per app process, so that many people's long work never takes what the process needs to
answer everyone's short requests: running commands (they wait on the event loop and cost no
thread, but a socket and some memory each) up to WORKSPACE_RUNNING_COMMANDS_PER_PROCESS, and long
work that holds a thread (a model's turn, a manual workflow run) up to the WORKSPACE_LONG_WORK_THREADS
threads that run it. Past either, the request is refused at once, 503 `server_busy` with
Retry-After, before anything is taken or stored: another process behind the load balancer, or this
one a moment later, will take it.

A process that is shutting down (`stop_taking`) takes no more, and stops the long work it holds
that can be stopped (a ticket's `stop_with`), so that its answers end with a result that says why.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from django.conf import settings

from collab.errors import Unavailable

logger = logging.getLogger(__name__)
Event = TypeVar("Event")

# Most long work ends within seconds; a client told to wait longer would wait for nothing.
BUSY_RETRY_AFTER_SECONDS = 5


class ServerBusy(Unavailable):
    def __init__(self, *, what: str, limit: int) -> None:
        super().__init__(
            error="server_busy",
            detail=(
                f"This server is running as many {what} as it takes at once ({limit}), for everyone together. "
                f"Nothing was started; try again in {BUSY_RETRY_AFTER_SECONDS} seconds."
            ),
            retry_after=BUSY_RETRY_AFTER_SECONDS,
        )


class ServerStopping(Unavailable):
    def __init__(self) -> None:
        super().__init__(
            error="server_stopping",
            detail=(
                "This server is shutting down and starts nothing new; nothing was started. "
                f"Try again in {BUSY_RETRY_AFTER_SECONDS} seconds."
            ),
            retry_after=BUSY_RETRY_AFTER_SECONDS,
        )


class Bound:
    """At most `limit()` tickets out at once in this process."""

    def __init__(self, what: str, limit: Callable[[], int]) -> None:
        self.what, self.limit = what, limit
        self._lock = threading.Lock()
        self._out: set[Ticket] = set()

    @property
    def taken(self) -> int:
        return len(self._out)

    def ticket(self) -> Ticket:
        """One ticket, or ServerBusy when all are out (ServerStopping once the process shuts down)."""
        limit = self.limit()
        with self._lock:
            if _stopping.is_set():
                raise ServerStopping()
            if limit > 0 and len(self._out) >= limit:
                raise ServerBusy(what=self.what, limit=limit)
            ticket = Ticket(self)
            self._out.add(ticket)
        return ticket

    def _give_back(self, ticket: Ticket) -> None:
        with self._lock:
            self._out.discard(ticket)

    def stoppers(self) -> list[Callable[[], None]]:
        with self._lock:
            return [ticket.stop for ticket in self._out if ticket.stop is not None]


class Ticket:
    """Given back once, however many times `release` is called (the stream's end, its close, a failure)."""

    def __init__(self, bound: Bound) -> None:
        self._bound: Bound | None = bound
        self._lock = threading.Lock()
        self.stop: Callable[[], None] | None = None

    def stop_with(self, stop: Callable[[], None]) -> None:
        """`stop()` ends the work this ticket admitted, should the process shut down meanwhile."""
        self.stop = stop
        if _stopping.is_set():
            _stopped_quietly(stop)

    def release(self) -> None:
        with self._lock:
            bound, self._bound = self._bound, None
        if bound is not None:
            bound._give_back(self)

    def released_after(self, events: Iterator[Event]) -> Iterator[Event]:
        """`events`, then this ticket given back: when they end, fail or are closed."""
        try:
            yield from events
        finally:
            self.release()


_stopping = threading.Event()


def _stopped_quietly(stop: Callable[[], None]) -> None:
    try:
        stop()
    except Exception:
        logger.exception("could not stop long work while the server shuts down")


def stop_taking() -> None:
    """The process shuts down: no ticket is given any more, and the work of those out is stopped
    (in this thread: call it from one that may wait on the backends)."""
    _stopping.set()
    for bound in (running_commands, long_work):
        for stop in bound.stoppers():
            _stopped_quietly(stop)


def stopping() -> bool:
    return _stopping.is_set()


def resume_taking() -> None:
    """Takes long work again (a process whose shutdown was called off; the tests of it)."""
    _stopping.clear()


# Long work that holds a thread is asked for with these methods only (a page's form, an API's POST).
LONG_WORK_METHODS = frozenset({"POST"})


def runs_long(view: Any) -> Any:
    """Marks a view (a function, or a DRF view class) whose POST is long work that holds a thread
    (a model's turn, a workflow run): the ASGI handler runs such a request on the long-work threads
    with a `long_work` ticket, or refuses it 503 `server_busy` (workspace/serving.py)."""
    view.long_work_methods = LONG_WORK_METHODS
    return view


def is_long_work(view: Any, method: str) -> bool:
    """Whether `method` on the resolved view function `view` (an `as_view()`, an `html_or_api`, a
    page) is long work (`runs_long`)."""
    for holder in (view, getattr(view, "view_class", None), getattr(view, "cls", None)):
        if method in getattr(holder, "long_work_methods", ()):
            return True
    return False


running_commands = Bound("commands", lambda: settings.WORKSPACE_RUNNING_COMMANDS_PER_PROCESS)
long_work = Bound("model turns and workflow runs", lambda: settings.WORKSPACE_LONG_WORK_THREADS)

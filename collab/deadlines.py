"""Deadlines kept by a thread of their own, not only by the loop that does the work.

A command's relay is a generator: the server resumes it only to send the client more. While a client
does not read (a stream left open, a slow network), the server waits in its write and the loop does
not run, so the command would run on past its time limit, and past its person's command slot, for as
long as the client holds the connection. A model server's answer is read in a thread blocked in
`recv()`, which no check between chunks reaches while nothing arrives (knowledge/llm_bounds.py). One
thread per process (started with the first limit) acts on each limit as it falls due: kills what
still runs (through a pidfd of the group's leader, which the caller's `kill` uses), or shuts a socket
down; the loop finds it done when it is resumed.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

# The loop kills at the deadline itself when it runs; the thread acts only after this much more.
SLACK_SECONDS = 0.25
# Ended limits stay in the heap until they fall due; past this many it is rebuilt without them.
_COMPACT_AT = 256


class TimeLimit:
    """`kill` called once `deadline` (time.monotonic) has passed, unless `end` was called first;
    it says whether it found anything to kill.

    `kill` signals the group through a pidfd the caller keeps: the caller calls `end` before it
    closes it, so a descriptor number the kernel has handed out again is never used. It must not
    wait for the group to go (one thread keeps every limit of the process); the loop, once
    resumed, does that before it reports the command killed."""

    def __init__(self, *, kill: Callable[[], bool], deadline: float) -> None:
        self._kill, self.deadline = kill, deadline
        self._lock = threading.Lock()
        self.ended = False
        self.enforced = False
        # Whether the kill found the group still there: the command ran past its limit.
        self.killed = False
        _keeper.watch(self)

    def end(self) -> None:
        """The command's loop is done with the group: nothing is killed through this any more."""
        with self._lock:
            self.ended = True

    def enforce(self) -> None:
        with self._lock:
            if self.ended:
                return
            self.enforced = True
            self.killed = self._kill()


class _Keeper:
    """The thread that enforces limits as they fall due (a heap by deadline)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, TimeLimit]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, limit: TimeLimit) -> None:
        with self._changed:
            if len(self._due) >= _COMPACT_AT:
                self._due = [entry for entry in self._due if not entry[2].ended]
                heapq.heapify(self._due)
            heapq.heappush(self._due, (limit.deadline + SLACK_SECONDS, next(self._order), limit))
            # Started here, not at import: a server that forks its workers starts none before.
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="sandbox-time-limits", daemon=True)
                self._thread.start()
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._changed.wait(None if not self._due else self._due[0][0] - time.monotonic())
                _, _, limit = heapq.heappop(self._due)
            try:
                limit.enforce()
            except Exception:
                logger.exception("could not kill a command past its time limit")


_keeper = _Keeper()

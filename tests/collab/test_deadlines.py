"""The thread that keeps commands' time limits while nobody resumes their relay (collab/deadlines.py)."""

from __future__ import annotations

import threading
import time

from collab import deadlines
from collab.deadlines import TimeLimit


def _limit(seconds_from_now: float, kills: list[str], name: str, done: threading.Event | None = None) -> TimeLimit:
    def kill() -> None:
        kills.append(name)
        if done is not None:
            done.set()

    return TimeLimit(kill=kill, deadline=time.monotonic() + seconds_from_now)


def test_a_limit_past_its_deadline_kills_and_one_ended_first_does_not():
    # Given two limits: one its command's loop ends before it falls due, one it does not end
    kills: list[str] = []
    later = threading.Event()
    ended = _limit(0.0, kills, "ended")
    ended.end()
    _limit(0.05, kills, "running", later)
    # When both have fallen due (the second after the first)
    assert later.wait(10)
    # Then only the one still running was killed
    assert kills == ["running"]
    assert ended.enforced is False


def test_ended_limits_do_not_pile_up_until_their_deadlines():
    # Given many commands with an hour's limit that ended at once
    kills: list[str] = []
    for number in range(deadlines._COMPACT_AT * 2):
        _limit(3600, kills, str(number)).end()
    # When one more starts
    running = _limit(3600, kills, "running")
    # Then the keeper holds few more than the limits still running, and killed nothing
    assert len(deadlines._keeper._due) <= deadlines._COMPACT_AT + 1
    assert kills == []
    running.end()

"""Sync generators driven from the event loop (collab.waits): their waits spent on the loop, not a
thread; closed whatever ends the driving; the same generators run plainly elsewhere."""

from __future__ import annotations

import asyncio
import os
import selectors
import threading
from collections.abc import Iterator

import pytest

from collab.waits import Readable, ReleasedAfter, driven, readable, waited_here, yields_waits
from tests.fixtures.loops import run_on_its_own_loop

# Each step on the request threads looks over the connection its thread holds (one a live server of
# an earlier test may have opened): database access, though these tests store nothing.
pytestmark = pytest.mark.django_db


def _pipe() -> tuple[int, int]:
    read_end, write_end = os.pipe()
    return read_end, write_end


def _reader(read_end: int, seen: list[str]) -> Iterator[str | Readable]:
    """Reads a pipe until it closes, waiting as `readable` says (blocking, or yielded)."""
    with selectors.DefaultSelector() as selector:
        selector.register(read_end, selectors.EVENT_READ)
        while True:
            seen.append("driven" if yields_waits() else "plain")
            if not (yield from readable(selector, (read_end,), 5.0)):
                continue
            data = os.read(read_end, 1024)
            if not data:
                return
            yield data.decode()


def _collected(events: Iterator, **driving) -> list:
    async def run() -> list:
        return [event async for event in driven(events, **driving)]

    return run_on_its_own_loop(run())


def test_a_driven_generator_yields_its_wait_to_the_loop_and_is_resumed_when_its_pipe_is_readable():
    # Given a generator reading a pipe that a thread writes to a moment later, then closes
    read_end, write_end = _pipe()
    seen: list[str] = []

    def write_later() -> None:
        threading.Event().wait(0.1)
        os.write(write_end, b"hello")
        threading.Event().wait(0.1)
        os.close(write_end)

    threading.Thread(target=write_later).start()
    # When it is driven from the event loop
    events = _collected(_reader(read_end, seen))
    os.close(read_end)
    # Then its data came through, and each wait it met was yielded (it ran driven, never blocking)
    assert events == ["hello"]
    assert set(seen) == {"driven"}


def test_the_same_generator_run_plainly_blocks_where_it_waits_and_yields_no_wait():
    # Given the same reader over a pipe already written and closed
    read_end, write_end = _pipe()
    os.write(write_end, b"hi")
    os.close(write_end)
    seen: list[str] = []
    # When it is iterated in this thread / Then only data comes out
    assert list(_reader(read_end, seen)) == ["hi"]
    assert set(seen) == {"plain"}
    os.close(read_end)


def test_on_the_long_work_threads_a_generator_blocks_where_it_waits():
    # Given the reader over a pipe written and closed, driven on a pool of its own (the long-work threads)
    from concurrent.futures import ThreadPoolExecutor

    read_end, write_end = _pipe()
    os.write(write_end, b"hi")
    os.close(write_end)
    seen: list[str] = []
    with ThreadPoolExecutor(1) as pool:
        # When it is driven there / Then it ran plainly: no wait reached the loop
        assert _collected(_reader(read_end, seen), pool=pool) == ["hi"]
    assert set(seen) == {"plain"}
    os.close(read_end)


def test_a_driven_generator_cancelled_while_it_waits_is_closed_and_runs_its_cleanup():
    # Given a generator that waits on a pipe nobody writes to, noting when it is closed
    read_end, write_end = _pipe()
    cleaned = threading.Event()

    def waiting() -> Iterator[str | Readable]:
        try:
            yield "started"
            while True:
                yield Readable((read_end,), 60.0)
        finally:
            cleaned.set()

    async def run() -> None:
        async def consume() -> None:
            async for _event in driven(waiting()):
                pass

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.1)
        # When the driving is cancelled (the client left, the server stops)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run_on_its_own_loop(run())
    # Then the generator's cleanup ran
    assert cleaned.is_set()
    os.close(read_end)
    os.close(write_end)


def test_a_context_variable_one_step_sets_is_seen_by_the_next():
    # Given a generator that sets a context variable in one step and reads it in the next
    import contextvars

    flag: contextvars.ContextVar[str] = contextvars.ContextVar("flag", default="unset")

    def steps() -> Iterator[str]:
        flag.set("set")
        yield "one"
        yield flag.get()

    # When it is driven (each step may run on another thread) / Then the second step sees the first's value
    assert _collected(steps()) == ["one", "set"]


def test_waits_reaching_a_caller_that_runs_events_to_their_end_are_spent_there():
    # Given events with a short wait among them
    events = ["a", Readable((), 0.01), "b"]
    # When a caller runs them in its own thread / Then the wait is spent, not passed on
    assert list(waited_here(iter(events))) == ["a", "b"]


def test_a_release_runs_once_when_the_events_end_or_are_closed_unstarted():
    # Given two wrapped streams of events, each with its release
    releases: list[str] = []
    finished = ReleasedAfter(iter(["x"]), lambda: releases.append("finished"))
    unstarted = ReleasedAfter((event for event in ["y"]), lambda: releases.append("unstarted"))
    # When one is read to its end and the other closed before its first event (twice)
    assert list(finished) == ["x"]
    unstarted.close()
    unstarted.close()
    # Then each release ran exactly once
    assert releases == ["finished", "unstarted"]

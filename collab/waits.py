"""Waiting without a thread: the thread pools of an app process, and sync generators driven from its event loop.

Under ASGI (workspace/serving.py) an app process has one event loop and two fixed pools of threads:
`request_threads()` runs the sync work of every request (middleware, views, the ORM) a step at a
time, and `long_work_threads()` runs the work that may take seconds to minutes in one go (a model's
turn, a manual workflow run), so that none of it ever waits behind the other.

Long work that mostly waits (a command's output, which may not come for minutes) need hold neither:
its generator says where it would block by yielding `Readable` instead of blocking (`readable()`,
only while `driven()` resumes it); the loop waits for the descriptors, and the generator's next
step runs on a request thread again. The same generator iterated plainly (a task, a test, an agent
tool) blocks where it used to and yields no `Readable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import select
import selectors
import threading
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import CancelledError, Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.db import close_old_connections

Event = TypeVar("Event")
Result = TypeVar("Result")


@dataclass(frozen=True, slots=True)
class Readable:
    """Yielded by a driven generator that would block until one of `fds` is readable, for at most
    `timeout` seconds: it is resumed once one is, or once that time has passed."""

    fds: tuple[int, ...]
    timeout: float


_DRIVEN: contextvars.ContextVar[bool] = contextvars.ContextVar("driven_from_the_event_loop", default=False)


def yields_waits() -> bool:
    """Whether the generator running now is driven from the event loop (`driven`), so that it
    yields its waits (`readable`, `pausing`) rather than block in them."""
    return _DRIVEN.get()


def readable(
    selector: selectors.BaseSelector, fds: Sequence[int], timeout: float, *, hold: float = 0.0
) -> Generator[Readable, None, bool]:
    """Whether one of the descriptors `selector` watches is readable within `timeout` seconds, as
    `yield from readable(...)`: under `driven()` the wait is the event loop's (this yields one
    `Readable`), elsewhere it blocks in `selector.select` as before. Driven, it first waits up to
    `hold` seconds here, on its thread: a wait that short costs less than a trip through the loop
    and back (a command that ends within milliseconds is answered in one step)."""
    if not _DRIVEN.get():
        return bool(selector.select(timeout=timeout))
    if selector.select(timeout=max(min(hold, timeout), 0.0)):
        return True
    yield Readable(tuple(fds), timeout)
    return bool(selector.select(timeout=0))


def pausing(timeout: float) -> Generator[Readable, None, None]:
    """`time.sleep(timeout)`, or under `driven()` a wait of the event loop's (`yield from pausing(...)`)."""
    if _DRIVEN.get():
        yield Readable((), timeout)
    else:
        threading.Event().wait(timeout)


def waited_here(events: Iterable[Event | Readable]) -> Iterator[Event]:
    """`events` for a caller that runs them to their end in its own thread: a wait they yield (they
    run inside a step of a driven generator) is spent here, blocking, not passed on."""
    for event in events:
        if isinstance(event, Readable):
            _spent_here(event)
        else:
            yield event


def _spent_here(wait: Readable) -> None:
    if wait.fds:
        select.select(wait.fds, [], [], max(wait.timeout, 0.0))
    else:
        threading.Event().wait(wait.timeout)


def finished_here(work: Generator[Readable, None, Result]) -> Result:
    """What `work` returns, run to its end in this thread, its waits spent here."""
    while True:
        try:
            wait = next(work)
        except StopIteration as ended:
            return ended.value
        _spent_here(wait)


def primed(events: Iterator[Event]) -> Iterator[Event]:
    """`events` with their first step run now, in this thread, so that what refuses the work
    raises here (a view answers it as a plain error before any of a stream is sent); a wait the
    first step meets is not waited for here, but left at the head of the rest."""
    driving = _DRIVEN.set(True)
    try:
        first = next(events, _ENDED)
    except BaseException:
        close = getattr(events, "close", None)
        if close is not None:
            close()
        raise
    finally:
        _DRIVEN.reset(driving)
    if first is _ENDED:
        return iter(())
    return ReleasedAfter(_first_then(first, events), getattr(events, "close", lambda: None))


def _first_then(first: Event, events: Iterator[Event]) -> Iterator[Event]:
    if isinstance(first, Readable) and not _DRIVEN.get():
        _spent_here(first)
    else:
        yield first
    yield from events


class ReleasedAfter(Iterator[Event]):
    """`events`, then `release()` once: when they end or fail, or when this is closed, started or
    not (a generator closed before its first step never runs its `finally`; a stream whose client
    left before the first byte is closed so)."""

    def __init__(self, events: Iterator[Event], release: Callable[[], None]) -> None:
        self._events, self._release = events, release

    def __next__(self) -> Event:
        try:
            return next(self._events)
        except BaseException:
            self._released()
            raise

    def close(self) -> None:
        try:
            close = getattr(self._events, "close", None)
            if close is not None:
                close()
        finally:
            self._released()

    def _released(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


_ENDED: Any = object()


def _advanced(events: Iterator[Event]) -> Event:
    # A step may be the first this pool thread runs in a while: a connection the database dropped
    # or that outlived DATABASE_CONN_MAX_AGE is replaced first, as Django does around a request.
    close_old_connections()
    return next(events, _ENDED)


def _closed_after(step: Future[Any] | None, events: Iterator[Any], context: contextvars.Context) -> None:
    if step is not None:
        # Waits for it: a generator cannot be closed while a step of it runs. One cancelled before
        # it started did not move the generator.
        with contextlib.suppress(CancelledError):
            step.exception()
    close = getattr(events, "close", None)
    if close is not None:
        close_old_connections()
        context.run(close)


async def driven(events: Iterator[Event], *, pool: Executor | None = None) -> AsyncIterator[Event]:
    """The events of the sync generator `events`, each step run on the request threads, the waits
    it yields (`Readable`) spent on the event loop, so that no thread is held while nothing
    happens; or, with a `pool` (the long-work threads), each step run there, blocking where it
    waits. Closing this (the client left, the server stops) closes `events` on its threads once
    its step in flight, if any, has ended: its cleanup (killing the command, giving back the
    person's slot) runs whatever cancelled the stream.

    Every step runs in one context of its own, so a context variable one step sets, the next sees,
    as if one thread ran them all."""
    loop = asyncio.get_running_loop()
    threads = pool or request_threads()
    context = contextvars.copy_context()
    context.run(_DRIVEN.set, pool is None)
    step: Future[Any] | None = None
    try:
        while True:
            step = threads.submit(context.run, _advanced, events)
            event = await asyncio.wrap_future(step)
            step = None
            if event is _ENDED:
                return
            if isinstance(event, Readable):
                await until_readable(loop, event)
                continue
            yield event
    finally:
        closing = asyncio.wrap_future(threads.submit(_closed_after, step, events, context))
        # Shielded: cancelled again meanwhile, the close still runs to its end on the pool.
        await asyncio.shield(closing)


async def until_readable(loop: asyncio.AbstractEventLoop, wait: Readable) -> None:
    """Returns once one of `wait.fds` is readable, or after `wait.timeout` seconds."""
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    for fd in wait.fds:
        loop.add_reader(fd, wake)
    try:
        async with asyncio.timeout(max(wait.timeout, 0.0)):
            await ready
    except TimeoutError:
        pass
    finally:
        for fd in wait.fds:
            loop.remove_reader(fd)


_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(name: str, size: int) -> ThreadPoolExecutor:
    # Made on first use, in the process that uses it: a server that forks its workers starts no
    # thread before the fork.
    with _pools_lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ThreadPoolExecutor(max_workers=size, thread_name_prefix=name)
        return pool


def request_threads() -> ThreadPoolExecutor:
    """The WORKSPACE_REQUEST_THREADS threads that run every request's sync work, a step at a time."""
    return _pool("request", settings.WORKSPACE_REQUEST_THREADS)


def long_work_threads() -> ThreadPoolExecutor:
    """The WORKSPACE_LONG_WORK_THREADS threads that run long work in one go (model turns, workflow
    runs); `collab.capacity` admits no more of it than there are threads."""
    return _pool("long-work", settings.WORKSPACE_LONG_WORK_THREADS)

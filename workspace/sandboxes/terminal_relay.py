"""A terminal relayed to a WebSocket (ASGI), on the event loop: no thread per terminal.

docs/ARCHITECTURE.md §11 and DESIGN.md §11 give the protocol. Binary frames are the PTY's bytes,
both ways. Text frames are JSON control:
- from the client: `{"type": "resize", "cols", "rows"}`, `{"type": "signal", "name": "INT"}`;
- from the server: `{"type": "replay", "start", "end"}` before the kept output is replayed (a `start`
  past the offset the client asked for means what came between was dropped), `{"type": "live",
  "offset"}` once live output begins (the offset a reconnect asks for to miss nothing), and
  `{"type": "exit", "code"}` once the command ended, and `{"type": "stopped", "error", "detail"}`
  when a command started in the terminal was stopped (job control: `fg` resumes it) because it may
  not run now (`busy` refused it: the person runs as many commands as they may). A connection
  another one took the terminal over from (another window) is closed with 4001, and should not
  reconnect by itself.

Backpressure: the next output is read from the keeper only once the client took the last, and
the keeper stops reading the terminal while 64 KiB wait for its viewer, so a slow client slows its
own terminal's program (its writes block, as on any terminal) and misses nothing; a client that
takes nothing for WORKSPACE_CLIENT_TIMEOUT_SECONDS is disconnected, and with nobody attached the
keeper reads on into its ring, dropping its oldest.

What the client may not do ends the connection with a close code, never a 500: a binary frame of
more than `MAX_INPUT_BYTES` (1009), a text frame that is no control message, or a size or signal
out of bounds (1008).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from collab.edge import body_of
from collab.errors import DomainError
from workspace.sandboxes.terminals import (
    STOP_JOBS_FOR_CERTAIN_FRAME,
    STOP_JOBS_FRAME,
    Busy,
    Exited,
    Live,
    Output,
    Replaying,
    TakenOver,
    TerminalEvent,
    TerminalGone,
    TerminalLink,
    TerminalRefused,
    input_frames,
    resize_frame,
    signal_frame,
)

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# The most bytes one input frame may carry (a paste is many frames of it at most).
MAX_INPUT_BYTES = 64 * 1024
CLOSE_TOO_BIG = 1009
CLOSE_POLICY = 1008
CLOSE_GONE = 1011
# Another connection (another window) took the terminal over: the client does not reconnect by itself.
CLOSE_TAKEN_OVER = 4001
# How long a command refused a slot has to stop at SIGTSTP before it is sent SIGSTOP.
STOP_GRACE_SECONDS = 1.0


# Told whether a command runs in the terminal's foreground (False too once the terminal's command
# ended); answers why it may not run, or None.
BusyHook = Callable[[bool], Awaitable[DomainError | None]]


async def _never_refused(running: bool) -> DomainError | None:
    return None


async def relay(
    link: TerminalLink, receive: Receive, send: Send, *, client_timeout: float, busy: BusyHook = _never_refused
) -> int | None:
    """Accepts the WebSocket and relays the terminal `link` reaches until either side ends; the
    link is detached then (the terminal goes on). Returns the code it closed the WebSocket with
    (None: the client left first; CLOSE_GONE: the sandbox keeps no such terminal).

    `busy` hears when the terminal starts or stops running a command (in its foreground or in the
    background); what it refuses is stopped (the foreground SIGTSTP, as Ctrl-Z would, background
    jobs SIGSTOP; all SIGSTOP if they have not stopped a second later) and the client told why."""
    await send({"type": "websocket.accept"})
    loop = asyncio.get_running_loop()
    connection = link.connection
    connection.setblocking(False)

    async def sent(message: Message) -> None:
        async with asyncio.timeout(client_timeout):
            await send(message)

    running = False
    insisting: list[asyncio.Task[None]] = []

    async def stop_if_still_running() -> None:
        # SIGTSTP may be ignored (a program's choice, or a shell's fork before its exec): what has
        # not stopped after a moment is stopped for certain.
        await asyncio.sleep(STOP_GRACE_SECONDS)
        if running:
            await loop.sock_sendall(connection, STOP_JOBS_FOR_CERTAIN_FRAME)

    async def from_keeper() -> int | None:
        nonlocal running
        while True:
            data = await loop.sock_recv(connection, 65536 + 5)
            if not data:
                return None
            try:
                events = link.feed(data)
            except TerminalGone:
                return CLOSE_GONE
            for event in events:
                if isinstance(event, TakenOver):
                    return CLOSE_TAKEN_OVER
                if isinstance(event, Busy):
                    running = event.running
                    refusal = await busy(event.running)
                    if refusal is not None:
                        await loop.sock_sendall(connection, STOP_JOBS_FRAME)
                        insisting.append(asyncio.create_task(stop_if_still_running()))
                        await sent(_stopped(refusal))
                    continue
                if isinstance(event, Exited):
                    await busy(False)
                await sent(_message(event))

    async def from_client() -> int | None:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return None
            try:
                frames = _keeper_frames(message)
            except _Refused as refused:
                return refused.code
            await loop.sock_sendall(connection, frames)

    tasks = [asyncio.create_task(from_keeper()), asyncio.create_task(from_client())]
    try:
        done, _pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        ended = next(iter(done))
        code = None if ended.exception() else ended.result()
        if ended is tasks[1] and code is None:
            return None  # the client left
        # A client that takes nothing does not take the close either: it is not waited for.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(client_timeout):
                await send({"type": "websocket.close", "code": code or 1000})
        return code or 1000
    finally:
        for task in tasks + insisting:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        link.detach()


class _Refused(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _keeper_frames(message: Message) -> bytes:
    data = message.get("bytes")
    if data is not None:
        if len(data) > MAX_INPUT_BYTES:
            raise _Refused(CLOSE_TOO_BIG)
        return input_frames(data)
    text = message.get("text")
    if text is None or len(text) > 1024:
        raise _Refused(CLOSE_POLICY)
    try:
        control = json.loads(text)
        kind = control["type"]
        if kind == "resize":
            return resize_frame(rows=_count(control["rows"]), cols=_count(control["cols"]))
        if kind == "signal":
            return signal_frame(str(control["name"]))
    except (ValueError, KeyError, TypeError, RecursionError, TerminalRefused):
        raise _Refused(CLOSE_POLICY) from None
    raise _Refused(CLOSE_POLICY)


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("not a count")
    return value


def _stopped(refusal: DomainError) -> Message:
    control = {"type": "stopped", **body_of(refusal)}
    return {"type": "websocket.send", "text": json.dumps(control)}


def _message(event: TerminalEvent) -> Message:
    if isinstance(event, Output):
        return {"type": "websocket.send", "bytes": event.data}
    if isinstance(event, Replaying):
        control: dict[str, Any] = {"type": "replay", "start": event.start, "end": event.end}
    elif isinstance(event, Live):
        control = {"type": "live", "offset": event.end}
    elif isinstance(event, Exited):
        control = {"type": "exit", "code": event.code}
    else:
        raise TypeError(event)
    return {"type": "websocket.send", "text": json.dumps(control)}

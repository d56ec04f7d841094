"""Terminals in a sandbox: a PTY inside the sandbox's boundary, kept by its exec agent.

The agent (exec_agent.pl, protocol 3) forks a keeper per terminal: it holds the PTY whose other
end is the command's controlling terminal (a shell, in a session of its own, as the sandbox's uid,
in its namespaces and cgroups, like any exec), and the last `RING_BYTES` of the output. A keeper
outlives its connection, so a terminal outlives the page or server process that opened it: any
server process attaches to it again by id and is sent the output from the offset it asks for (what
is still kept), then live output; an ended terminal says its exit code to every attach and is never
started again. Its memory is the sandbox's, not the server's.

A `TerminalLink` is one connection to a keeper; `events()` reads what it says, and
`send_input`, `resize`, `signal` and `close_terminal` talk back. Nothing here holds a thread: the
link's socket can be waited on (`fileno`) by whoever relays it.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass

from workspace.sandboxes.base import SandboxGone, SandboxUnavailable

# What a keeper keeps of a terminal's output for the next attach (exec_agent.pl `$RING_BYTES`).
RING_BYTES = 256 * 1024
_HEADER = struct.Struct(">cI")
_FRAME_LIMIT = 65536
_ANSWER_SECONDS = 5.0
_TERMINAL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SECRET = re.compile(r"[A-Za-z0-9_-]{16,128}")
# The signals a terminal's foreground programs may be sent, by name (the same numbers on every
# machine the agent knows terminals on).
SIGNALS = {"HUP": 1, "INT": 2, "QUIT": 3, "TERM": 15, "TSTP": 20}
MAX_SIZE = 9999  # rows or columns (the agent takes at most four digits)
# The protocol a sandbox host's connection is upgraded to, to relay a terminal's keeper as it speaks.
HOST_UPGRADE = "workspace-terminal"
# How often the keeper says again that a command runs in a terminal (exec_agent.pl `$BUSY_REPEAT`).
BUSY_REPEAT_SECONDS = 300


class TerminalGone(Exception):
    """The sandbox keeps no terminal of that id (closed, or its sandbox was)."""


class TerminalRefused(ValueError):
    """A terminal id, size or signal the agent would not take."""


@dataclass(frozen=True)
class Replaying:
    """What follows replays output bytes `start` to `end`; `start` past the offset asked for means
    the output between was dropped (the keeper keeps `RING_BYTES`)."""

    start: int
    end: int


@dataclass(frozen=True)
class Output:
    data: bytes


@dataclass(frozen=True)
class Live:
    """The replay is done; what follows is live output, from offset `end`."""

    end: int


@dataclass(frozen=True)
class Exited:
    code: int


@dataclass(frozen=True)
class TakenOver:
    """Another attach took the terminal over (another window): this link ends."""


@dataclass(frozen=True)
class Busy:
    """Whether a command other than the shell holds the terminal's foreground (`top`, a build, a
    REPL): said on attach, when it changes, and again every few minutes while it holds."""

    running: bool


TerminalEvent = Replaying | Output | Live | Exited | TakenOver | Busy


def checked_id(terminal_id: str) -> str:
    if not _TERMINAL_ID.fullmatch(terminal_id):
        raise TerminalRefused("A terminal id is 1 to 64 letters, digits, dashes or underscores.")
    return terminal_id


def new_secret() -> str:
    """A terminal's secret: what an attach says, so that code in the sandbox cannot attach."""
    return secrets.token_urlsafe(24)


def checked_secret(secret: str) -> str:
    if not _SECRET.fullmatch(secret):
        raise TerminalRefused("A terminal's secret is 16 to 128 URL-safe characters.")
    return secret


def checked_size(rows: int, cols: int) -> tuple[int, int]:
    if not (1 <= rows <= MAX_SIZE and 1 <= cols <= MAX_SIZE):
        raise TerminalRefused(f"A terminal has 1 to {MAX_SIZE} rows and columns.")
    return rows, cols


def exit_code(status: int) -> int:
    """A wait status as a shell reports it (a command killed by signal N: 128 + N)."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + 9


class TerminalLink:
    """One connection to a terminal's keeper."""

    def __init__(self, connection: socket.socket, *, buffered: bytes = b"") -> None:
        self.connection = connection
        # What was read from the connection past what its opening said (the http backend reads the
        # host's answer to the upgrade, and may read the first frames with it).
        self._buffer = bytearray(buffered)

    def fileno(self) -> int:
        return self.connection.fileno()

    def events(self, *, timeout: float | None = None) -> Iterator[TerminalEvent]:
        """What the keeper says, as it says it; ends when the connection does (the terminal was
        closed, or another attach took it over). `timeout`: the longest wait for the next bytes."""
        self.connection.settimeout(timeout)
        while True:
            # One frame at a time: a reader that stops early leaves the rest for its next read.
            for kind, body in self._frames():
                yield _event(kind, body)
            try:
                chunk = self.connection.recv(_FRAME_LIMIT + _HEADER.size)
            except OSError:
                chunk = b""
            if not chunk:
                return
            self._buffer.extend(chunk)

    def feed(self, data: bytes) -> list[TerminalEvent]:
        """The events that `data`, read from the connection by whoever waits on it, completes."""
        self._buffer.extend(data)
        return [_event(kind, body) for kind, body in self._frames()]

    def send_input(self, data: bytes) -> None:
        self._sendall(input_frames(data))

    def resize(self, *, rows: int, cols: int) -> None:
        self._sendall(resize_frame(rows=rows, cols=cols))

    def signal(self, name: str) -> None:
        self._sendall(signal_frame(name))

    def close_terminal(self) -> None:
        """Ends the terminal: its session is hung up, and what is left of it killed."""
        self._sendall(CLOSE_FRAME)

    def take_buffered(self) -> bytes:
        """The bytes read from the connection that no event was made of yet (for a relay of the raw stream)."""
        buffered = bytes(self._buffer)
        self._buffer.clear()
        return buffered

    def detach(self) -> None:
        """Closes this connection; the terminal goes on, its output kept for the next attach."""
        self.connection.close()

    def _sendall(self, frames: bytes) -> None:
        try:
            self.connection.sendall(frames)
        except OSError as exc:
            raise TerminalGone(f"the terminal's keeper hung up: {exc}") from exc

    def _frames(self) -> Iterator[tuple[bytes, bytes]]:
        while len(self._buffer) >= _HEADER.size:
            kind, length = _HEADER.unpack_from(self._buffer)
            if length > _FRAME_LIMIT:
                raise TerminalGone("the terminal's keeper sent what no keeper sends")
            end = _HEADER.size + length
            if len(self._buffer) < end:
                return
            data = bytes(self._buffer[_HEADER.size : end])
            del self._buffer[:end]
            yield kind, data


def _frame(kind: bytes, data: bytes) -> bytes:
    return _HEADER.pack(kind, len(data)) + data


def input_frames(data: bytes) -> bytes:
    """What the keeper is sent for input typed on the terminal."""
    return b"".join(_frame(b"I", data[start : start + _FRAME_LIMIT]) for start in range(0, len(data), _FRAME_LIMIT))


def resize_frame(*, rows: int, cols: int) -> bytes:
    return _frame(b"W", struct.pack(">HH", *checked_size(rows, cols)))


def signal_frame(name: str) -> bytes:
    if name not in SIGNALS:
        raise TerminalRefused(f"A terminal takes the signals {', '.join(SIGNALS)}.")
    return _frame(b"K", str(SIGNALS[name]).encode())


CLOSE_FRAME = _frame(b"C", b"")
# Stops every command a terminal runs that may not run now: its foreground as Ctrl-Z would, its
# background jobs with SIGSTOP; then, for one that did not stop at SIGTSTP (it ignores it, or was
# caught between its shell's fork and its exec, when it still ignores it as its interactive shell
# does), all of them with SIGSTOP. Not what a client may send.
STOP_JOBS_FRAME = _frame(b"Z", b"T")
STOP_JOBS_FOR_CERTAIN_FRAME = _frame(b"Z", b"S")


def _event(kind: bytes, data: bytes) -> TerminalEvent:
    if kind == b"O":
        return Output(data)
    if kind == b"A":
        start, end = (int(part) for part in data.split())
        return Replaying(start, end)
    if kind == b"Y":
        return Live(int(data))
    if kind == b"X":
        return Exited(exit_code(int(data)))
    if kind == b"T":
        return TakenOver()
    if kind == b"B":
        return Busy(data == b"1")
    if kind == b"N":
        raise TerminalGone("no such terminal")
    if kind == b"E":
        raise TerminalRefused(data.decode(errors="replace").strip())
    raise TerminalGone(f"the terminal's keeper sent an unknown frame {kind!r}")


def _request(fields: list[str]) -> bytes:
    body = "\0".join(fields).encode()
    return struct.pack(">I", len(body)) + body


def terminal_start(
    connection: socket.socket,
    *,
    terminal_id: str,
    rows: int,
    cols: int,
    idle_seconds: int,
    secret: str,
    argv: list[str],
    env: dict[str, str],
) -> TerminalLink:
    """Starts `argv` on a new terminal of the agent `connection` reaches, attached to the link
    returned; the terminal closes itself once nobody was attached for `idle_seconds` (0: never).
    Every later attach must say `secret`, which code in the sandbox does not know."""
    try:
        rows, cols = checked_size(rows, cols)
        idle = str(max(0, min(int(idle_seconds), 10**9 - 1)))
        fields = ["pty", checked_id(terminal_id), str(rows), str(cols), idle, checked_secret(secret)]
        fields += [str(len(argv)), *argv, str(len(env))]
        fields += [f"{key}={value}" for key, value in env.items()]
        connection.sendall(_request(fields))
        link = TerminalLink(connection)
        # The agent names the keeper's pid (P), then waits for the go-ahead, as for an exec.
        first = next(iter(_first_frames(link)), None)
        if first is None or first[0] != b"P":
            raise SandboxGone("the sandbox's agent did not take the terminal")
        connection.sendall(b"G")
        # Its keeper's first word comes once it listens for attaches: a page that attaches the
        # moment it hears of the terminal must find it.
        _keeper_listening(link)
    except BaseException:
        connection.close()
        raise
    return link


def _keeper_listening(link: TerminalLink) -> None:
    """Waits for the new keeper's first frame, left for the link's events; a refusal (E) is raised."""
    link.connection.settimeout(_ANSWER_SECONDS)
    while not _holds_a_frame(link._buffer):
        chunk = link.connection.recv(_FRAME_LIMIT + _HEADER.size)
        if not chunk:
            raise SandboxGone("the sandbox's agent did not start the terminal")
        link._buffer.extend(chunk)
    link.connection.settimeout(None)
    if link._buffer[:1] == b"E":
        try:
            link.feed(b"")
        except TerminalRefused as refused:
            raise SandboxUnavailable(f"the sandbox's agent refused the terminal: {refused}") from refused


def _holds_a_frame(buffer: bytearray) -> bool:
    return len(buffer) >= _HEADER.size and len(buffer) >= _HEADER.size + _HEADER.unpack_from(buffer)[1]


def terminal_attach(
    connection: socket.socket, *, terminal_id: str, secret: str, since: int = 0, generation: int | None = None
) -> TerminalLink:
    """A new link to the terminal, whose keeper replays its output from offset `since` (what it
    still keeps) before live output; the link before it, if any, is ended. TerminalGone when the
    sandbox keeps no such terminal (from the link's first event).

    `generation` orders attaches (by default this machine's monotonic clock, in microseconds, now):
    the keeper refuses one older than the newest it took, so a page's old connection that reaches
    it late, after the reload's new one, cannot take the terminal back from it."""
    if generation is None:
        generation = time.monotonic_ns() // 1000
    try:
        fields = [
            "att",
            checked_id(terminal_id),
            str(max(0, int(since))),
            checked_secret(secret),
            str(max(0, int(generation))),
        ]
        connection.sendall(_request(fields))
    except BaseException:
        connection.close()
        raise
    return TerminalLink(connection)


def _first_frames(link: TerminalLink) -> Iterator[tuple[bytes, bytes]]:
    link.connection.settimeout(_ANSWER_SECONDS)
    while True:
        frames = list(link._frames())
        if frames:
            yield from frames
            return
        chunk = link.connection.recv(_FRAME_LIMIT + _HEADER.size)
        if not chunk:
            return
        link._buffer.extend(chunk)

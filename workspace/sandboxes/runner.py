"""Runs one command as a child process with a timeout and bounded output capture."""

from __future__ import annotations

import contextlib
import functools
import os
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

from collab.deadlines import TimeLimit
from collab.waits import Readable, readable, yields_waits
from workspace.sandboxes.base import OUTPUT_LIMIT_BYTES, ExecResult

MARKER_VARIABLE = "WORKSPACE_SANDBOX_ID"
_CHUNK = 64 * 1024
PIPE_GRACE_SECONDS = 1.0
# How often the loop looks at the clock and the process while the pipes stay quiet.
POLL_SECONDS = 0.05
# The same, when the loop is driven from the event loop (collab.waits): each look is a step on a
# request thread, so it looks only when something is due (a deadline, the agent's silence, the
# pipes' grace), and otherwise this often: a stop reaches a command by its process group at once;
# this is how soon one whose mark sandbox code rewrote is stopped through its pidfd
# (exec_agent.py). 500 quiet streams cost 250 steps a second.
DRIVEN_POLL_SECONDS = 2.0
# Driven so, a command's first moments are still waited for on its thread (`collab.waits.readable`'s
# `hold`): most commands end within them, and each trip through the event loop costs a request
# thread hop; a command that runs on waits on the loop after that.
DRIVEN_HOLD_SECONDS = 0.05


@dataclass
class Capture:
    limit: int
    data: bytearray
    truncated: bool = False

    def take(self, chunk: bytes) -> bytes:
        """Keeps what fits and returns it. Reading goes on past the limit (a writer blocked on a
        full pipe would never exit); the rest is dropped."""
        room = max(self.limit - len(self.data), 0)
        kept = chunk[:room]
        self.data.extend(kept)
        if len(chunk) > room:
            self.truncated = True
        return kept


def process_carries_marker(pid: int, sandbox_id: str) -> bool:
    """True if `pid` was started for this sandbox; guards every kill against reused pids."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{MARKER_VARIABLE}={sandbox_id}".encode() in environ.split(b"\x00")


def marked_pids(sandbox_id: str) -> list[int]:
    """Every process on this host started for the sandbox, found by the marker in its environment.

    This also finds children that left their process group (`setsid`) or whose group leader
    already exited, which a kill by group would miss.
    """
    return [
        int(entry)
        for entry in os.listdir("/proc")
        if entry.isdigit() and process_carries_marker(int(entry), sandbox_id)
    ]


def kill_marked(pids: list[int], sandbox_id: str) -> int:
    killed = 0
    for pid in pids:
        if pid > 1 and process_carries_marker(pid, sandbox_id):
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    return killed


OutputChunk = tuple[str, bytes]  # ("stdout" | "stderr", bytes as they arrived)


def run_streaming(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    on_start: Callable[[int], None] | None = None,
    on_exit: Callable[[int], None] | None = None,
    output_limit: int = OUTPUT_LIMIT_BYTES,
) -> Iterator[OutputChunk | ExecResult | Readable]:
    """Runs `argv` in its own session, yielding each chunk of output as it arrives, then the
    ExecResult; past `timeout` the whole process group is killed. Closing the iterator early (a
    browser that went away) kills it too.

    `env` is the whole environment: nothing of the server's own (its secrets) is inherited.
    """
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except (FileNotFoundError, PermissionError) as exc:
        yield ExecResult(exit_code=127, stdout="", stderr=f"{exc.strerror}: {argv[0]}\n")
        return
    if on_start:
        on_start(process.pid)
    # Not reaped yet, so the pid is still the child's; the pidfd keeps it so for the time limit,
    # which kills from a thread of its own while nobody resumes this generator (collab/deadlines.py).
    pidfd = os.pidfd_open(process.pid)
    limit = TimeLimit(
        kill=functools.partial(kill_group_through, pidfd, process.pid, settle=False), deadline=started + timeout
    )
    out, err = Capture(output_limit, bytearray()), Capture(output_limit, bytearray())
    try:
        timed_out = yield from _drain_until_exit(
            process, {process.stdout: ("stdout", out), process.stderr: ("stderr", err)}, started + timeout, pidfd
        )
    except GeneratorExit:
        kill_group(process.pid)
        process.wait()
        raise
    finally:
        limit.end()
        os.close(pidfd)
        if on_exit:
            on_exit(process.pid)
    code = process.returncode
    yield captured_result(
        code if code >= 0 else 128 - code, out, err, timed_out=timed_out or limit.killed, started=started
    )


def captured_result(exit_code: int, out: Capture, err: Capture, *, timed_out: bool, started: float) -> ExecResult:
    """The result of a command that ended with `exit_code` (as a shell reports it), begun at
    `started` (time.monotonic), from what was kept of its two streams."""
    return ExecResult(
        exit_code=exit_code,
        stdout=bytes(out.data).decode("utf-8", errors="replace"),
        stderr=bytes(err.data).decode("utf-8", errors="replace"),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        timed_out=timed_out,
        duration_ms=round((time.monotonic() - started) * 1000),
    )


def _drain_until_exit(
    process: subprocess.Popen, captures: dict, deadline: float, pidfd: int
) -> Generator[OutputChunk | Readable, None, bool]:
    """Reads both pipes in this thread until the command ends, yielding what it keeps of each
    chunk; returns True if the command was killed at `deadline`. Driven from the event loop
    (collab.waits), it yields its waits instead, the process's exit (`pidfd`) among what wakes it.

    One selector loop, no reader threads: most of an exec's cost is process start-up, and threads
    would add their own. A background child (`server &`) may keep the pipes open and lives on in
    the sandbox until it is closed; the reply waits for it no longer than a short grace.
    """
    started = time.monotonic()
    timed_out = False
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        for stream in captures:
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            now = time.monotonic()
            if exited_at is None and process.poll() is not None:
                exited_at = now
            if exited_at is not None and now > exited_at + PIPE_GRACE_SECONDS:
                break
            # Not once it has exited: a client that read slowly may resume this loop past the
            # deadline of a command that ended in time (the time limit's thread killed on time
            # what still ran, and says so).
            if not timed_out and now > deadline and exited_at is None:
                timed_out = True
                kill_group(process.pid)
            if yields_waits():
                due = [exited_at + PIPE_GRACE_SECONDS] if exited_at is not None else [deadline]
                wait = min(max(min(due) - now, 0.0), DRIVEN_POLL_SECONDS)
                fds = [key.fd for key in selector.get_map().values()] + ([pidfd] if exited_at is None else [])
                hold = DRIVEN_HOLD_SECONDS - (now - started)
                if not (yield from readable(selector, fds, wait, hold=hold)):
                    continue
            for key, _events in selector.select(timeout=0 if yields_waits() else POLL_SECONDS):
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                name, capture = captures[key.fileobj]
                kept = capture.take(chunk)
                if kept:
                    yield name, kept
    for stream in captures:
        stream.close()
    if yields_waits():
        while not exited(pidfd) and time.monotonic() < deadline:
            yield Readable((pidfd,), min(deadline - time.monotonic(), DRIVEN_POLL_SECONDS))
    try:
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        # It closed its pipes but ran on to the deadline.
        timed_out = True
        kill_group(process.pid)
        process.wait()
    return timed_out


# pidfd_send_signal's flag (Linux 6.9) that signals the process group of the pidfd's process.
_PIDFD_SIGNAL_PROCESS_GROUP = 1 << 2


# How long a kill waits for the group's last process to be gone (SIGKILL takes effect when each
# process next runs: microseconds, or longer on a loaded machine or in uninterruptible I/O).
KILL_SETTLE_SECONDS = 1.0


def kill_group_through(pidfd: int, pid: int, *, settle: bool = True) -> bool:
    """SIGKILL to the process group led by the process `pidfd` holds (whose pid is `pid`): never
    to a group that has that pid number since. Before Linux 6.9, by number, and only while the
    leader still runs (until then its pid is its own). With `settle`, returns once no process of
    the group is left (within KILL_SETTLE_SECONDS), so a command reported killed is not still
    running; a caller killing the same group again has waited already. False when there was no
    group left to kill."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL, None, _PIDFD_SIGNAL_PROCESS_GROUP)
    except ProcessLookupError:
        return False
    except OSError:
        if exited(pidfd):
            return False
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    if not settle:
        return True
    deadline = time.monotonic() + KILL_SETTLE_SECONDS
    while time.monotonic() < deadline:
        try:
            signal.pidfd_send_signal(pidfd, 0, None, _PIDFD_SIGNAL_PROCESS_GROUP)
        except ProcessLookupError:
            return True
        time.sleep(0.001)
    return True


def exited(pidfd: int) -> bool:
    """A pidfd reads as ready once its process has exited."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)

"""The server's side of the exec agent (exec_agent.pl), the process that holds a sandbox open.

Without it every exec ran a chain of host programs: `sh` joining the sandbox's cgroups, `nsenter`
entering its seven namespaces as its uid, `setpriv` for no_new_privs, then the command: about
5 ms of process start-ups, as much as starting a fresh bubblewrap sandbox. The agent already sits
inside all of that (it is the command bubblewrap started, as the sandbox uid with no_new_privs), so
it only forks the command. It listens on a Unix socket the server made in the sandbox's state
directory on the host (which no sandbox sees) and passed to it as a file descriptor, so any
server process on this machine can reach it and no sandbox code can.

The agent counts as sandbox code: it may be killed or taken over from inside (same uid). What it
says is read with bounds; time limits, stops and closes kill its commands from the host, by the
host pid of each command's process group, found among the agent's own children. A hostile agent
can only lie about its own sandbox's commands, which its sandbox's code could do anyway.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import selectors
import socket
import struct
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

from collab.deadlines import TimeLimit
from collab.waits import Readable, readable, yields_waits
from workspace.sandboxes.base import OUTPUT_LIMIT_BYTES, ExecResult, SandboxGone
from workspace.sandboxes.runner import (
    DRIVEN_HOLD_SECONDS,
    DRIVEN_POLL_SECONDS,
    PIPE_GRACE_SECONDS,
    POLL_SECONDS,
    Capture,
    OutputChunk,
    captured_result,
    exited,
    kill_group_through,
)

PERL = "/usr/bin/perl"
SOCKET_NAME = "agent.sock"
# The agent's protocol, recorded in a sandbox's state: 2 waits for the server's go-ahead ("G")
# before it starts a command (sandboxes opened before it say `true` and do not); 3 also keeps
# terminals (workspace/sandboxes/terminals.py).
AGENT_PROTOCOL = 3
GO_AHEAD_PROTOCOL = 2
TERMINAL_PROTOCOL = 3
AGENT_SOURCE = (Path(__file__).with_name("exec_agent.pl")).read_text()
_HEADER = struct.Struct(">cI")
# The longest frame the agent may send: its reads are 64 KiB; anything longer is not the agent.
_FRAME_LIMIT = 65536
_CONNECT_SECONDS = 5.0
# How long the agent may stay silent about a command before the server looks whether it is
# stopped or traced (`kill -STOP 2`, ptrace from inside): such an agent accepts nothing, and every
# exec would run to its limit. One merely slow (a sandbox at its cpu or memory limit) is waited for.
ANSWER_SECONDS = 1.0
_BACKLOG = 64
_LATE_READS = 64
# Syscall numbers by machine (the kernel's unistd tables; aarch64 and riscv64 share the generic
# one): perl calls what it has no built-in for by number. The agent makes itself non-dumpable with
# prctl; a warm sandbox's waiter drops to the sandbox's uid with the other four.
_GENERIC_SYSCALLS = {
    "prctl": 167,
    "setgroups": 159,
    "setresgid": 149,
    "setresuid": 147,
    "capset": 91,
    "setsid": 157,
}
_SYSCALLS = {
    "x86_64": {"prctl": 157, "setgroups": 116, "setresgid": 119, "setresuid": 117, "capset": 126, "setsid": 112},
    "aarch64": _GENERIC_SYSCALLS,
    "riscv64": _GENERIC_SYSCALLS,
}


# The terminal ioctls the agent needs, in its order (TIOCGPTN, TIOCSPTLCK, TIOCSCTTY, TIOCSWINSZ,
# TIOCSIG, TIOCGPGRP): the generic numbers, which x86_64, aarch64 and riscv64 all use.
_TERMINAL_IOCTLS = (0x80045430, 0x40045431, 0x540E, 0x5414, 0x40045436, 0x540F)
_TERMINAL_MACHINES = ("x86_64", "aarch64", "riscv64")


def syscall_numbers(*names: str) -> list[int] | None:
    """This machine's numbers of the syscalls `names`, or None where they are not known here."""
    known = _SYSCALLS.get(platform.machine())
    return [known[name] for name in names] if known else None


def agent_available() -> bool:
    return os.access(PERL, os.X_OK)


def agent_argv(listen_fd: int) -> list[str]:
    """The command bubblewrap starts as the sandbox's holder: perl reading the agent's program
    (AGENT_SOURCE) from its stdin, told its socket's fd and this machine's prctl syscall number
    (0 where unknown: the agent then stays dumpable). Not `-e`: the program would fill every `ps`
    line of the sandbox."""
    prctl, setsid = syscall_numbers("prctl", "setsid") or [0, 0]
    ioctls = ",".join(map(str, _TERMINAL_IOCTLS)) if platform.machine() in _TERMINAL_MACHINES else ""
    # Where the terminal numbers are not known, the agent refuses terminals and runs commands as ever.
    return [PERL, "-", str(listen_fd), str(prctl), str(setsid), ioctls]


def waits_for_go_ahead(protocol: object) -> bool:
    """Whether an agent of the `protocol` a sandbox's state records waits for "G" (`true`: the first)."""
    return isinstance(protocol, int) and not isinstance(protocol, bool) and protocol >= GO_AHEAD_PROTOCOL


def keeps_terminals(protocol: object) -> bool:
    return isinstance(protocol, int) and not isinstance(protocol, bool) and protocol >= TERMINAL_PROTOCOL


def agent_listen(home: Path) -> socket.socket:
    """The listening socket at `<home>/agent.sock`; the caller passes it to the agent and closes it."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _short_path(home) as directory:
            listener.bind(f"{directory}/{SOCKET_NAME}")
            # Before it listens: connecting takes write permission, which only its owner keeps.
            os.chmod(f"{directory}/{SOCKET_NAME}", 0o600)
        listener.listen(_BACKLOG)
    except OSError:
        listener.close()
        raise
    return listener


@contextlib.contextmanager
def _short_path(directory: Path) -> Iterator[str]:
    """`directory` as /proc/self/fd/N: a socket's path may be at most 107 bytes, a state
    directory's path need not be that short."""
    descriptor = os.open(directory, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{descriptor}"
    finally:
        os.close(descriptor)


def agent_connect(home: Path) -> socket.socket:
    """A connection to the agent of the sandbox whose state directory is `home`."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(_CONNECT_SECONDS)
    try:
        with _short_path(home) as directory:
            connection.connect(f"{directory}/{SOCKET_NAME}")
    except OSError as exc:
        connection.close()
        raise SandboxGone(f"the exec agent of {home.name} does not answer: {exc}") from exc
    return connection


def _request(argv: list[str], env: dict[str, str]) -> bytes:
    fields = [str(len(argv)), *argv, str(len(env)), *(f"{key}={value}" for key, value in env.items())]
    body = "\0".join(fields).encode()
    return struct.pack(">I", len(body)) + body


def run_via_agent(
    home: Path,
    *,
    holder_pid: int,
    argv: list[str],
    env: dict[str, str],
    timeout: float,
    on_start: Callable[[int], None] | None = None,
    on_exit: Callable[[int], None] | None = None,
    stopped: Callable[[], bool] | None = None,
    output_limit: int = OUTPUT_LIMIT_BYTES,
    go_ahead: bool = True,
) -> Iterator[OutputChunk | ExecResult | Readable]:
    """`runner.run_streaming` through the sandbox's agent: each chunk of output as it arrives,
    then the ExecResult. Past `timeout`, once `stopped()` says so (asked every few ms), or when
    the iterator is closed early, the command's process group is killed from the host.
    SandboxGone when the agent does not take the command.

    `stopped` lets a stop reach the command through this session's pidfd: a kill by the leader's
    pid alone needs a check that the pid is still the session's, and the session's environment
    (the sandbox's marker) is sandbox code's to rewrite (/proc/<pid>/mem, same uid).
    """
    started = time.monotonic()
    connection = agent_connect(home)
    hung_up: OSError | None = None
    try:
        connection.sendall(_request(argv, env))
    except OSError as exc:
        # An agent that cannot fork (the sandbox at its process limit) answers and hangs up
        # before it has read the request: its answer is still there to read.
        hung_up = exc
    session = _Session(connection, holder_pid=holder_pid, deadline=started + timeout)
    session.answer_by = started + ANSWER_SECONDS
    session.stopped = stopped
    session.go_ahead = go_ahead
    out, err = Capture(output_limit, bytearray()), Capture(output_limit, bytearray())
    try:
        yield from session.relay({b"O": ("stdout", out), b"E": ("stderr", err)}, on_start=on_start)
    except GeneratorExit:
        session.kill()
        raise
    finally:
        connection.close()
        session.forget_leader()
        if on_exit and session.leader:
            on_exit(session.leader)
    if hung_up is not None and not session.answered:
        raise SandboxGone(f"the exec agent of {home.name} hung up: {hung_up}") from hung_up
    timed_out = session.timed_out or (session.limit is not None and session.limit.killed)
    yield captured_result(session.exit_code(), out, err, timed_out=timed_out, started=started)


class _Session:
    """One command's connection: its frames read with bounds, its deadline kept, its process
    group's host pid (`leader`) found once the agent names it."""

    def __init__(self, connection: socket.socket, *, holder_pid: int, deadline: float) -> None:
        self.started = time.monotonic()
        self.connection = connection
        self.holder_pid = holder_pid
        self.deadline = deadline
        self.leader = 0
        # A pidfd of the leader: its host pid is free again once its group is empty (sandbox code
        # can kill its session and leave the group), and a host process may then get it.
        self.leader_fd: int | None = None
        self.status: int | None = None
        self.timed_out = False
        self.buffer = bytearray()
        self.answer_by = deadline
        self.answered = False
        self.named = False
        self.stopped: Callable[[], bool] | None = None
        self.stopping_until: float | None = None
        self.go_ahead = True  # the agent waits for "G" before it starts the command (AGENT_PROTOCOL)
        self.killed = False
        # Kept while nobody resumes `relay` (a client that stopped reading): collab/deadlines.py.
        self.limit: TimeLimit | None = None
        # Reads of what was already sent, past the deadline, before the clock decides: more than
        # a socket's buffer holds (a few frames).
        self.late_reads = _LATE_READS

    def exit_code(self) -> int:
        """As a shell reports it; a command whose session was killed (time limit, stop, close,
        the kernel's memory killer) ends as killed by SIGKILL."""
        if self.status is None:
            return 128 + 9
        if os.WIFSIGNALED(self.status):
            return 128 + os.WTERMSIG(self.status)
        return os.WEXITSTATUS(self.status) if os.WIFEXITED(self.status) else 128 + 9

    def kill(self) -> None:
        """SIGKILL to the leader's process group, through its pidfd: never to a group that has
        its pid number since (a host process's, another sandbox's). Only the first kill waits for
        the group to go: a group that does not empty (a process in uninterruptible sleep, a
        zombie sandbox code keeps in it) holds the exec one KILL_SETTLE_SECONDS, not one per kill
        (the time limit's, then its pipes' end)."""
        if self.leader_fd is not None:
            kill_group_through(self.leader_fd, self.leader, settle=not self.killed)
            self.killed = True

    def forget_leader(self) -> None:
        if self.limit is not None:
            self.limit.end()
        if self.leader_fd is not None:
            os.close(self.leader_fd)
            self.leader_fd = None

    def relay(
        self, captures: dict[bytes, tuple[str, Capture]], *, on_start: Callable[[int], None] | None
    ) -> Generator[OutputChunk | Readable, None, None]:
        exited_at: float | None = None
        with selectors.DefaultSelector() as selector:
            selector.register(self.connection, selectors.EVENT_READ)
            while True:
                now = time.monotonic()
                if exited_at is not None and now > exited_at + PIPE_GRACE_SECONDS:
                    return
                if self.stopping_until is None and self.leader and self.stopped and self.stopped():
                    self.kill()
                    self.stopping_until = now + PIPE_GRACE_SECONDS
                if self.stopping_until is not None and now > self.stopping_until:
                    return
                if now > self.deadline and (self.timed_out or self.status is None):
                    if not self.timed_out and self.leader and self.late_reads and selector.select(timeout=0):
                        # Past the deadline with what the agent sent still unread (a client that
                        # read slowly kept this loop waiting): read it first, the command's exit
                        # perhaps; the time limit's thread kills on time what still ran. Bounded:
                        # a command that writes without pause is not read forever.
                        self.late_reads -= 1
                    elif self.timed_out or not self.leader:
                        # Killed and still not closed, or never named its process: nothing more to wait for.
                        self.timed_out = True
                        self.kill()
                        return
                    else:
                        self.timed_out = True
                        self.kill()
                        self.deadline = now + PIPE_GRACE_SECONDS
                if not self.answered and now > self.answer_by and _stopped(self.holder_pid):
                    raise SandboxGone("its exec agent is stopped: it takes no commands")
                hold = DRIVEN_HOLD_SECONDS - (now - self.started)
                if not (
                    yield from readable(selector, (self.connection.fileno(),), self._wait(now, exited_at), hold=hold)
                ):
                    continue
                try:
                    chunk = self.connection.recv(_FRAME_LIMIT + _HEADER.size)
                except OSError:
                    chunk = b""
                if not chunk:
                    if self.status is None:
                        # The session is gone before its command ended (killed from inside, or by
                        # the kernel): the command would run on with no limit; its group goes too.
                        self.kill()
                    return
                self.answered = True
                self.buffer.extend(chunk)
                for kind, data in self._frames():
                    if kind == b"P" and not self.named:
                        self.named = True
                        self.leader, self.leader_fd = self._host_pid(data)
                        if self.leader_fd is not None:
                            kill = functools.partial(kill_group_through, self.leader_fd, self.leader, settle=False)
                            self.limit = TimeLimit(kill=kill, deadline=self.deadline)
                        # The session waits for the go-ahead before it starts the command, so
                        # the pidfd is held before anything could kill the session; one not
                        # found (killed by other sandbox code meanwhile) starts nothing.
                        if self.go_ahead and not (self.leader and _send_go(self.connection)):
                            return
                        if on_start and self.leader:
                            on_start(self.leader)
                    elif kind == b"X" and self.status is None and exited_at is None:
                        self.status = _wait_status(data)
                        exited_at = time.monotonic()
                    elif kind in captures:
                        name, capture = captures[kind]
                        kept = capture.take(data)
                        if kept:
                            yield name, kept
                    else:
                        # Not the agent's protocol (a second P or X, an unknown frame): the
                        # command ends here, killed, rather than run on without its time limit.
                        self.kill()
                        return

    def _wait(self, now: float, exited_at: float | None) -> float:
        """How long the loop may wait for the agent before it looks at the clock and the stop mark:
        POLL_SECONDS, or driven from the event loop (collab.waits), until the next moment it has to
        act on, but at least every DRIVEN_POLL_SECONDS (a stop mark is looked for then)."""
        if not yields_waits():
            return POLL_SECONDS
        moments = [self.deadline] if self.timed_out or self.status is None else []
        if not self.answered:
            moments.append(self.answer_by)
        if exited_at is not None:
            moments.append(exited_at + PIPE_GRACE_SECONDS)
        if self.stopping_until is not None:
            moments.append(self.stopping_until)
        return min(max(min(moments) - now, 0.0), DRIVEN_POLL_SECONDS)

    def _frames(self) -> Iterator[tuple[bytes, bytes]]:
        while len(self.buffer) >= _HEADER.size:
            kind, length = _HEADER.unpack_from(self.buffer)
            if length > _FRAME_LIMIT:
                # Not the agent's frame: end here, as if the connection closed.
                self.buffer.clear()
                yield b"!", b""
                return
            end = _HEADER.size + length
            if len(self.buffer) < end:
                return
            data = bytes(self.buffer[_HEADER.size : end])
            del self.buffer[:end]
            yield kind, data

    def _host_pid(self, data: bytes) -> tuple[int, int | None]:
        """The host pid of the agent's child whose pid in the sandbox is `data`, with a pidfd
        of it; (0, None) when it has none."""
        wanted = _number(data)
        if not wanted:
            return 0, None
        for child in _children(self.holder_pid):
            if _innermost_pid(child) != wanted:
                continue
            try:
                handle = os.pidfd_open(child)
            except OSError:
                return 0, None
            # Still that child once the pidfd holds it (its pid cannot change hands while it runs).
            if child in _children(self.holder_pid) and _innermost_pid(child) == wanted and not exited(handle):
                return child, handle
            os.close(handle)
            return 0, None
        return 0, None


def _send_go(connection: socket.socket) -> bool:
    try:
        connection.sendall(b"G")
    except OSError:
        return False
    return True


def _number(data: bytes) -> int:
    """A pid or a wait status: both fit a C int."""
    text = data.decode("ascii", errors="replace")
    return int(text) if text.isdigit() and len(text) < 11 and int(text) < 2**31 else 0


def _wait_status(data: bytes) -> int | None:
    """A wait status is 16 bits; anything else is unknown (ends as killed)."""
    if data == b"0":
        return 0
    return _number(data) if 0 < _number(data) < 1 << 16 else None


def _stopped(pid: int) -> bool:
    """`pid` is stopped by a signal or a tracer."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _innermost_pid(pid: int) -> int:
    """The pid `pid` has in its own (innermost) pid namespace."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return 0

"""The sandbox backend protocol and the value objects that cross it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from collab.waits import waited_here
from quotas.values import SandboxSize

# Exec input limits: a command is typed or generated, never a payload.
MAX_COMMAND_BYTES = 16 * 1024
MAX_ARGV_ITEMS = 512
# Each of stdout and stderr is kept up to this many bytes; the rest is drained and dropped.
OUTPUT_LIMIT_BYTES = 64 * 1024

Command = str | list[str]


class SandboxUnavailable(Exception):
    """The backend cannot be reached or cannot open a sandbox now (503 to the caller)."""


class SandboxHostUnreachable(SandboxUnavailable):
    """A sandbox host did not answer at all (refused, timed out, cut off halfway), as opposed to
    one that answered with a refusal: its sandboxes cannot be reached until it is back. `host`
    is its URL."""

    def __init__(self, message: str, *, host: str) -> None:
        super().__init__(message)
        self.host = host


# The error code of a SandboxMisconfigured, to callers and between an app and its sandbox hosts.
MISCONFIGURED = "sandbox_misconfigured"


class SandboxMisconfigured(SandboxUnavailable):
    """The backend cannot open sandboxes until an administrator changes its configuration (500 to
    the caller, never "try again": waiting does not fix it)."""


class SandboxGone(Exception):
    """The backend no longer knows this sandbox (closed, reclaimed, host restarted)."""


class CommandInvalid(ValueError):
    """An exec command that is empty, too big or of the wrong shape."""


@dataclass(frozen=True)
class OpenedSandbox:
    """A new sandbox and the size its backend actually enforces (what the ledger charges)."""

    id: str
    spec: SandboxSize


@dataclass(frozen=True)
class HostCapacity:
    """What a sandbox host offers a pool in all, as its /healthz reports it (DESIGN.md §5 "Many
    sandbox machines"): a new sandbox goes where what the ledger counts leaves room for its size.
    `sandboxes` None: no bound on the count."""

    cpu_cores: float
    memory_bytes: int
    sandboxes: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_report(cls, raw: object) -> HostCapacity | None:
        """The capacity a host reported, or None from a host that reports none (an older one) or
        nonsense: a pool then places nothing there by capacity."""
        if not isinstance(raw, dict):
            return None
        cpu, memory, count = raw.get("cpu_cores"), raw.get("memory_bytes"), raw.get("sandboxes")
        # NaN and infinity fail the comparison, as does a 400-digit number.
        numbers_ok = all(
            isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 2**62
            for value in (cpu, memory)
        )
        count_ok = count is None or (isinstance(count, int) and not isinstance(count, bool) and 0 < count < 2**62)
        if not (numbers_ok and count_ok):
            return None
        return cls(cpu_cores=float(cpu), memory_bytes=int(memory), sandboxes=count)


class EndReason:
    """Why a command ended, as an exec result's `reason` says (exit 137 alone says only "killed")."""

    EXITED = "exited"  # it ended by itself, whatever its exit code
    TIMED_OUT = "timed_out"  # it ran past its time limit and was killed
    MEMORY_LIMIT = "memory_limit"  # the kernel killed it: the sandbox used its whole memory limit
    STOPPED = "stopped"  # someone stopped it (the terminal's Stop, the API)
    SANDBOX_CLOSED = "sandbox_closed"  # its sandbox was closed while it ran

    ALL = (EXITED, TIMED_OUT, MEMORY_LIMIT, STOPPED, SANDBOX_CLOSED)


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    duration_ms: int = 0
    # An `EndReason` and the sentence that tells a person what happened ("" when it just exited);
    # `ended_by` names who stopped it or closed its sandbox (the app knows, never a backend).
    reason: str = EndReason.EXITED
    reason_detail: str = ""
    ended_by: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# What an exec reports as it runs: ("stdout" | "stderr", bytes) chunks, then one ExecResult.
ExecEvent = tuple[str, bytes] | ExecResult


def final_result(events: Iterable[ExecEvent]) -> ExecResult:
    """The ExecResult that ends a stream of exec events (the chunks are in it too, bounded)."""
    for event in waited_here(events):
        if isinstance(event, ExecResult):
            return event
    raise SandboxUnavailable("the exec ended without a result")


@runtime_checkable
class SandboxBackend(Protocol):
    """What the workspace needs from an isolation technology.

    `open` must not return before limits are in force; `close` must stop every process the
    sandbox started and be safe to call twice. `probe` answers "is it still there" and raises
    SandboxUnavailable when it cannot tell, so callers never mistake an outage for a death.
    """

    name: str

    def open(
        self, *, workspace_id: str, spec: SandboxSize, workspace: Path | None = None, disk_bytes: int | None = None
    ) -> OpenedSandbox: ...

    def exec(self, sandbox_id: str, *, command: Command, timeout: float, exec_id: str = "") -> ExecResult: ...

    def exec_streaming(
        self, sandbox_id: str, *, command: Command, timeout: float, exec_id: str = ""
    ) -> Iterator[ExecEvent]:
        """`exec` as it happens; a backend that cannot stream yields the whole output at the end.
        `exec_id` names the command for `stop`; its result then says it was stopped."""
        ...

    def stop(self, sandbox_id: str, exec_id: str) -> bool:
        """Kills the command `exec_id` (its process group), leaving the sandbox and anything else
        in it running; False when no such command runs there."""
        ...

    def probe(self, sandbox_id: str) -> bool: ...

    def close(self, sandbox_id: str) -> None: ...

    def sandboxes_older_than(self, seconds: float) -> list[str]:
        """Ids of the sandboxes it runs that were opened at least `seconds` ago (reconciliation)."""
        ...


def validate_command(command: Any) -> Command:
    """A shell string or an argv list of strings, non-empty and bounded."""
    if isinstance(command, str):
        if not command.strip():
            raise CommandInvalid("The command is empty.")
        if "\x00" in command:
            raise CommandInvalid("The command contains a NUL byte.")
        if len(command.encode("utf-8")) > MAX_COMMAND_BYTES:
            raise CommandInvalid(f"The command is longer than {MAX_COMMAND_BYTES} bytes.")
        return command
    if isinstance(command, list):
        if not command or not all(isinstance(part, str) for part in command):
            raise CommandInvalid("An argv command is a non-empty list of strings.")
        if not command[0].strip():
            raise CommandInvalid("The program name (argv[0]) is empty.")
        if len(command) > MAX_ARGV_ITEMS:
            raise CommandInvalid(f"The command has more than {MAX_ARGV_ITEMS} arguments.")
        if any("\x00" in part for part in command):
            raise CommandInvalid("The command contains a NUL byte.")
        if sum(len(part.encode("utf-8")) for part in command) > MAX_COMMAND_BYTES:
            raise CommandInvalid(f"The command is longer than {MAX_COMMAND_BYTES} bytes.")
        return list(command)
    raise CommandInvalid("The command must be a string (run by a shell) or a list of strings (argv).")


def command_argv(command: Command) -> list[str]:
    return ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)

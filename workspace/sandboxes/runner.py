"""Runs one command as a child process with a timeout and bounded output capture."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from workspace.sandboxes.base import OUTPUT_LIMIT_BYTES, ExecResult

MARKER_VARIABLE = "WORKSPACE_SANDBOX_ID"
_CHUNK = 64 * 1024


@dataclass
class _Capture:
    limit: int
    data: bytearray
    truncated: bool = False

    def drain(self, stream: IO[bytes]) -> None:
        # Keep reading past the limit: a writer blocked on a full pipe would never exit.
        # read1: return what the pipe has now, rather than block until a full chunk arrives.
        while chunk := stream.read1(_CHUNK):
            room = self.limit - len(self.data)
            if room > 0:
                self.data.extend(chunk[:room])
            if len(chunk) > max(room, 0):
                self.truncated = True
        stream.close()


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


def run_bounded(
    argv: list[str],
    *,
    cwd: Path,
    timeout: float,
    sandbox_id: str,
    on_start: Callable[[int], None] | None = None,
    on_exit: Callable[[int], None] | None = None,
    output_limit: int = OUTPUT_LIMIT_BYTES,
) -> ExecResult:
    """Runs `argv` in its own session; past `timeout` the whole process group is killed."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(cwd),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        MARKER_VARIABLE: sandbox_id,
    }
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
        return ExecResult(exit_code=127, stdout="", stderr=f"{exc.strerror}: {argv[0]}\n")
    if on_start:
        on_start(process.pid)
    out, err = _Capture(output_limit, bytearray()), _Capture(output_limit, bytearray())
    readers = [
        threading.Thread(target=out.drain, args=(process.stdout,), daemon=True),
        threading.Thread(target=err.drain, args=(process.stderr,), daemon=True),
    ]
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(process.pid)
        process.wait()
    finally:
        if on_exit:
            on_exit(process.pid)
    # A background child (`server &`) may keep the pipes open and lives on in the sandbox until
    # it is closed; the reply does not wait for it beyond a short grace.
    grace_ends = time.monotonic() + 1.0
    for reader in readers:
        reader.join(timeout=max(0.0, grace_ends - time.monotonic()))
    code = process.returncode
    return ExecResult(
        exit_code=code if code >= 0 else 128 - code,
        stdout=bytes(out.data).decode("utf-8", errors="replace"),
        stderr=bytes(err.data).decode("utf-8", errors="replace"),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        timed_out=timed_out,
        duration_ms=round((time.monotonic() - started) * 1000),
    )


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)

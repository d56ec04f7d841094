"""The `local` backend: a sandbox is a control group (or prlimit prefix) plus a state directory.

State lives on disk, not in memory, so any process on this machine (a web worker, the worker
command, the sandbox host) can exec in, probe or close a sandbox another one opened.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
import uuid
from pathlib import Path

from workspace.sandboxes.base import (
    Command,
    ExecResult,
    OpenedSandbox,
    SandboxGone,
    SandboxSpec,
    command_argv,
)
from workspace.sandboxes.isolation import Confinement, IsolationDriver
from workspace.sandboxes.runner import kill_marked, marked_pids, process_carries_marker, run_bounded

_STATE_FILE = "state.json"


class LocalBackend:
    name = "local"

    def __init__(
        self,
        *,
        state_dir: Path,
        workspace_root: Path,
        driver: IsolationDriver,
        defaults: SandboxSpec | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.workspace_root = workspace_root
        self.driver = driver
        self.defaults = defaults or SandboxSpec()

    def _home(self, sandbox_id: str) -> Path:
        if not sandbox_id or "/" in sandbox_id or sandbox_id.startswith("."):
            raise SandboxGone(f"no sandbox {sandbox_id!r}")
        return self.state_dir / sandbox_id

    def _state(self, sandbox_id: str) -> dict:
        try:
            return json.loads((self._home(sandbox_id) / _STATE_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise SandboxGone(f"no sandbox {sandbox_id!r}") from exc

    def open(self, *, item_id: str, spec: SandboxSpec, workspace: Path | None = None) -> OpenedSandbox:
        sandbox_id = f"loc-{uuid.uuid4().hex[:16]}"
        effective = spec.inherit(self.defaults)
        directory = workspace or self.workspace_root / str(item_id)
        directory.mkdir(parents=True, exist_ok=True)
        confinement = self.driver.create(sandbox_id, effective)
        home = self._home(sandbox_id)
        (home / "pids").mkdir(parents=True)
        state = {
            "id": sandbox_id,
            "item_id": str(item_id),
            "workspace": str(directory),
            "spec": effective.as_dict(),
            "confinement": confinement.as_dict(),
        }
        # Written last and atomically: a sandbox exists once its state file does.
        temporary = home / f".{_STATE_FILE}.tmp"
        temporary.write_text(json.dumps(state))
        os.replace(temporary, home / _STATE_FILE)
        return OpenedSandbox(id=sandbox_id, spec=effective)

    def exec(self, sandbox_id: str, *, command: Command, timeout: float) -> ExecResult:
        state = self._state(sandbox_id)
        confinement = Confinement.from_dict(state["confinement"])
        pids_dir = self._home(sandbox_id) / "pids"
        return run_bounded(
            confinement.wrap(command_argv(command)),
            cwd=Path(state["workspace"]),
            timeout=timeout,
            sandbox_id=sandbox_id,
            on_start=lambda pid: _touch(pids_dir / str(pid)),
            on_exit=lambda pid: _unlink(pids_dir / str(pid)),
        )

    def probe(self, sandbox_id: str) -> bool:
        try:
            state = self._state(sandbox_id)
        except SandboxGone:
            return False
        confinement = Confinement.from_dict(state["confinement"])
        return all(Path(group).is_dir() for group in confinement.groups)

    def close(self, sandbox_id: str) -> None:
        """Kills everything the sandbox started, then forgets it; closing twice is harmless."""
        try:
            state = self._state(sandbox_id)
        except SandboxGone:
            return
        home = self._home(sandbox_id)
        confinement = Confinement.from_dict(state["confinement"])
        # Stop new execs first: without the state file the sandbox no longer exists for them.
        _unlink(home / _STATE_FILE)
        tracked = [int(entry.name) for entry in (home / "pids").iterdir() if entry.name.isdigit()]
        for leader in tracked:
            _kill_group_marked(leader, sandbox_id)
        kill_marked(confinement.member_pids() + marked_pids(sandbox_id), sandbox_id)
        _wait_until_gone(sandbox_id, confinement)
        self.driver.destroy(confinement)
        shutil.rmtree(home, ignore_errors=True)

    def sandboxes(self) -> list[str]:
        if not self.state_dir.is_dir():
            return []
        return sorted(entry.name for entry in self.state_dir.iterdir() if (entry / _STATE_FILE).exists())


def _kill_group_marked(leader: int, sandbox_id: str) -> None:
    if leader > 1 and process_carries_marker(leader, sandbox_id):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, signal.SIGKILL)


def _wait_until_gone(sandbox_id: str, confinement: Confinement, *, seconds: float = 3.0) -> None:
    """SIGKILL is asynchronous; a kernel cgroup cannot be removed until its last task is reaped."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = marked_pids(sandbox_id) + (confinement.member_pids() if confinement.kernel else [])
        if not alive:
            return
        kill_marked(alive, sandbox_id)
        time.sleep(0.02)


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.touch()


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()

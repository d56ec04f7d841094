"""The `local` backend: a sandbox is a control group, a bubblewrap init holding its namespaces,
and a state directory.

State lives on disk, not in memory, so any process on this machine (a web worker, the worker
command, the sandbox host) can exec in, probe or close a sandbox another one opened.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from collab.sizes import format_bytes
from quotas.values import SandboxSize
from workspace.sandboxes.base import (
    Command,
    EndReason,
    ExecEvent,
    ExecResult,
    OpenedSandbox,
    SandboxGone,
    SandboxMisconfigured,
    SandboxUnavailable,
    command_argv,
    final_result,
)
from workspace.sandboxes.boundary import SANDBOX_PATH, WORKSPACE_MOUNT, Boundary, untraversable_parent
from workspace.sandboxes.exec_agent import (
    AGENT_PROTOCOL,
    AGENT_SOURCE,
    agent_argv,
    agent_connect,
    agent_listen,
    keeps_terminals,
    run_via_agent,
    waits_for_go_ahead,
)
from workspace.sandboxes.isolation import Confinement, IsolationDriver
from workspace.sandboxes.runner import (
    MARKER_VARIABLE,
    kill_group_through,
    kill_marked,
    marked_pids,
    process_carries_marker,
    run_streaming,
)
from workspace.sandboxes.terminals import TerminalLink, terminal_attach, terminal_start
from workspace.sandboxes.volumes import workspace_prepare
from workspace.sandboxes.warm import Skeleton, WarmPool

_STATE_FILE = "state.json"
_INIT_READY_SECONDS = 10.0
_EXEC_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Inits this process started: reaped when they end, so no zombie stays behind.
_started_inits: dict[str, subprocess.Popen] = {}


class LocalBackend:
    name = "local"

    def __init__(
        self,
        *,
        state_dir: Path,
        workspace_root: Path,
        driver: IsolationDriver,
        boundary: Boundary,
        defaults: SandboxSize | None = None,
        cap: SandboxSize | None = None,
        warm: int = 0,
    ) -> None:
        self.state_dir = state_dir
        self.workspace_root = workspace_root
        self.driver = driver
        self.boundary = boundary
        self.defaults = defaults or SandboxSize()
        # The kernel ceiling of a dimension that resolves to no limit (WORKSPACE_SANDBOX_CAP_*).
        self.cap = cap or SandboxSize()
        # Skeletons made ahead of opens (warm.py), where sandboxes keep namespaces and an agent.
        self.warm = WarmPool(size=warm if boundary.uses_agent else 0, state_dir=state_dir, driver=driver)

    def home(self, sandbox_id: str) -> Path:
        """The sandbox's directory of this backend's state (its pids, its agent's socket, its state file)."""
        if not sandbox_id or "/" in sandbox_id or sandbox_id.startswith("."):
            raise SandboxGone(f"no sandbox {sandbox_id!r}")
        return self.state_dir / sandbox_id

    def state(self, sandbox_id: str) -> dict:
        """What the backend recorded of the sandbox when it opened it (its item's id, workspace, size,
        confinement, holder); SandboxGone when it has no such sandbox."""
        try:
            return json.loads((self.home(sandbox_id) / _STATE_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise SandboxGone(f"no sandbox {sandbox_id!r}") from exc

    def open(
        self, *, workspace_id: str, spec: SandboxSize, workspace: Path | None = None, disk_bytes: int | None = None
    ) -> OpenedSandbox:
        """`workspace` is the prepared directory (the app's file store); else this backend prepares
        `<workspace_root>/<workspace_id>` with an image of `disk_bytes` (a sandbox host)."""
        _reap_finished_inits()
        skeleton = self.warm.take()
        sandbox_id = skeleton.sandbox_id if skeleton else f"loc-{uuid.uuid4().hex[:16]}"
        effective = spec.inherit(self.defaults)
        uid = self.boundary.uid_for(str(workspace_id))
        # The kernel gets the capped size; the ledger is handed `effective`, so what an app leaves
        # undeclared is bounded here and still charged as nothing. A skeleton's groups exist (with
        # its waiter inside): this writes their limits before anything of the sandbox runs there.
        enforced = effective.within(self.cap)
        try:
            directory = workspace or workspace_prepare(
                self.workspace_root / str(workspace_id), limit_bytes=disk_bytes, uid=uid
            )
            confinement = self.driver.create(sandbox_id, enforced)
        except BaseException:
            if skeleton:
                skeleton.discard(self.driver)
            raise
        home = self.home(sandbox_id)
        (home / "pids").mkdir(parents=True, exist_ok=skeleton is not None)
        init: dict | None = None
        if self.boundary.keeps_namespaces:
            try:
                init = self._start_init(sandbox_id, home, directory, confinement, uid, skeleton)
            except SandboxUnavailable:
                self.driver.destroy(confinement)
                shutil.rmtree(home, ignore_errors=True)
                raise
        state = {
            "id": sandbox_id,
            "item_id": str(workspace_id),  # the key sandboxes opened before wrote too
            "workspace": str(directory),
            "spec": effective.as_dict(),
            "enforced": enforced.as_dict(),
            "confinement": confinement.as_dict(),
            "uid": uid,
            "init": init,
        }
        # Written last and atomically: a sandbox exists once its state file does.
        temporary = home / f".{_STATE_FILE}.tmp"
        temporary.write_text(json.dumps(state))
        os.replace(temporary, home / _STATE_FILE)
        return OpenedSandbox(id=sandbox_id, spec=effective)

    def _start_init(
        self,
        sandbox_id: str,
        home: Path,
        directory: Path,
        confinement: Confinement,
        uid: int | None,
        skeleton: Skeleton | None = None,
    ) -> dict:
        """Starts the bubblewrap init inside the sandbox's cgroups (through a warm skeleton's
        waiter, already in them, when there is one) and waits until it is set up."""
        blocked = untraversable_parent(directory, uid)
        if blocked is not None:
            if skeleton:
                skeleton.discard(self.driver)
            raise SandboxMisconfigured(
                f"the sandbox uid cannot reach its workspace: {blocked} needs the x bit for others (chmod o+x)"
            )
        if skeleton:
            holder = agent_argv(skeleton.listen_fd)
            # Where the waiter drops to the uid itself, the init's argv does not (no `setpriv`).
            drops_uid = uid is not None and skeleton.drops_uid
            argv = self.boundary.init_argv(
                workspace=directory, info_fd=skeleton.info_fd, uid=None if drops_uid else uid, holder=holder
            )
            skeleton.start(argv, uid=uid if drops_uid else None, then=AGENT_SOURCE)
            return self._await_init(sandbox_id, skeleton.process, skeleton.info_read)
        info_read, info_write = os.pipe()
        listener = agent_listen(home) if self.boundary.uses_agent else None
        try:
            holder = agent_argv(listener.fileno()) if listener else None
            argv = self.boundary.init_argv(workspace=directory, info_fd=info_write, uid=uid, holder=holder)
            # Its output (both streams) goes to a pipe this process reads until the ready line and
            # then closes: a file would let sandbox code that takes over the holder fill the disk.
            process = subprocess.Popen(
                confinement.wrap(argv),
                cwd="/",
                env={"PATH": SANDBOX_PATH, MARKER_VARIABLE: sandbox_id},
                pass_fds=(info_write, listener.fileno()) if listener else (info_write,),
                stdin=subprocess.PIPE if listener else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            if process.stdin:
                _hand_over(process.stdin, AGENT_SOURCE)
        finally:
            os.close(info_write)
            # Only the agent may accept: were the server's copy kept, a dead agent's socket would
            # still take connections that nobody answers.
            if listener:
                listener.close()
        return self._await_init(sandbox_id, process, info_read)

    def _await_init(self, sandbox_id: str, process: subprocess.Popen, info_read: int) -> dict:
        """Waits for the init's ready line; kills it and says bubblewrap's reason when it fails."""
        try:
            said = _until_ready(process.stdout, self.boundary, seconds=_INIT_READY_SECONDS)
            info = _read_json(info_read) if said is None else None
            if info is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                said = (said or b"") + _rest(process.stdout)
        finally:
            os.close(info_read)
            if process.stdout:
                process.stdout.close()
        if not info or "child-pid" not in info:
            reason = (said or b"").decode(errors="replace").strip()[-300:] or "no reason given"
            raise SandboxUnavailable(f"bubblewrap could not set the sandbox up: {reason}")
        _started_inits[sandbox_id] = process
        pid = int(info["child-pid"])
        # bubblewrap's pid 1 reaps; its one child (the agent, or a `sleep`) sits in /workspace, where execs start.
        holder = _children(pid)
        return {
            "pid": pid,
            "pidns": _pid_namespace(pid),
            "holder": holder[0] if holder else pid,
            "agent": AGENT_PROTOCOL if self.boundary.uses_agent else False,
        }

    def exec(self, sandbox_id: str, *, command: Command, timeout: float, exec_id: str = "") -> ExecResult:
        return final_result(self.exec_streaming(sandbox_id, command=command, timeout=timeout, exec_id=exec_id))

    def exec_streaming(
        self, sandbox_id: str, *, command: Command, timeout: float, exec_id: str = ""
    ) -> Iterator[ExecEvent]:
        state = self.state(sandbox_id)
        confinement = Confinement.from_dict(state["confinement"])
        home = self.home(sandbox_id)
        pids_dir = home / "pids"
        env = {
            "PATH": SANDBOX_PATH,
            "HOME": WORKSPACE_MOUNT,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "TMPDIR": "/tmp",
            MARKER_VARIABLE: sandbox_id,
        }
        init = state.get("init")
        ended = _Ending(home=home, exec_id=valid_exec_id(exec_id), timeout=timeout, state=state)
        ended.ooms_before = self.driver.oom_kills(confinement)
        record = {
            "on_start": lambda pid: _record(pids_dir / str(pid), ended.exec_id),
            "on_exit": lambda pid: _unlink(pids_dir / str(pid)),
        }
        if init and not _init_alive(init):
            raise SandboxGone(f"the namespaces of sandbox {sandbox_id!r} are gone")
        if init and init.get("agent"):
            events = run_via_agent(
                home,
                holder_pid=init["holder"],
                argv=command_argv(command),
                env=env,
                timeout=timeout,
                # A stop reaches the command through the session's pidfd too: sandbox code can
                # rewrite the marker `stop` checks before it kills by pid.
                stopped=lambda: bool(ended.exec_id) and (home / "stops" / ended.exec_id).exists(),
                go_ahead=waits_for_go_ahead(init["agent"]),
                **record,
            )
            return ended.explained(events, lambda: self.driver.oom_kills(confinement))
        if init:
            argv = self.boundary.enter_argv(holder_pid=init["holder"], uid=state.get("uid"), argv=command_argv(command))
            cwd, outer_env = Path("/"), env
        elif self.boundary.enabled:
            argv = self.boundary.oneshot_argv(workspace=Path(state["workspace"]), env=env, argv=command_argv(command))
            cwd, outer_env = Path("/"), {"PATH": SANDBOX_PATH, MARKER_VARIABLE: sandbox_id}
        else:
            argv = command_argv(command)
            cwd, outer_env = Path(state["workspace"]), {**env, "HOME": state["workspace"]}
        events = run_streaming(confinement.wrap(argv), cwd=cwd, env=outer_env, timeout=timeout, **record)
        return ended.explained(events, lambda: self.driver.oom_kills(confinement))

    def terminal_start(
        self, sandbox_id: str, *, terminal_id: str, secret: str, rows: int, cols: int, idle_seconds: int = 0
    ) -> TerminalLink:
        """A new terminal in the sandbox: an interactive shell on a PTY inside its boundary (its
        namespaces, uid and cgroups, as any exec), kept by its agent (workspace/sandboxes/terminals.py).
        SandboxUnavailable for a sandbox whose agent keeps no terminals (one opened before they were)."""
        home = self._agent_home(sandbox_id)
        env = {
            "PATH": SANDBOX_PATH,
            "HOME": WORKSPACE_MOUNT,
            "LANG": "C.UTF-8",
            "TERM": "xterm-256color",
            "TMPDIR": "/tmp",
            MARKER_VARIABLE: sandbox_id,
        }
        argv = ["/bin/bash", "-i"] if os.access("/bin/bash", os.X_OK) else ["/bin/sh", "-i"]
        connection = agent_connect(home)
        return terminal_start(
            connection,
            terminal_id=terminal_id,
            secret=secret,
            rows=rows,
            cols=cols,
            idle_seconds=idle_seconds,
            argv=argv,
            env=env,
        )

    def terminal_attach(
        self, sandbox_id: str, *, terminal_id: str, secret: str, since: int = 0, generation: int | None = None
    ) -> TerminalLink:
        """A link to a terminal of the sandbox, replaying its output from `since` (what is kept);
        `generation` orders it among attaches (terminals.terminal_attach: by default, now)."""
        connection = agent_connect(self._agent_home(sandbox_id))
        return terminal_attach(connection, terminal_id=terminal_id, secret=secret, since=since, generation=generation)

    def _agent_home(self, sandbox_id: str) -> Path:
        init = self.state(sandbox_id).get("init")
        if not init or not _init_alive(init):
            raise SandboxGone(f"the namespaces of sandbox {sandbox_id!r} are gone")
        if not keeps_terminals(init.get("agent")):
            raise SandboxUnavailable(
                "This sandbox was opened before terminals were: close it, and the next one opens with them."
            )
        return self.home(sandbox_id)

    def stop(self, sandbox_id: str, exec_id: str) -> bool:
        """Kills the process group of the command `exec_id` (the one its exec started, which
        `timeout` kills too); the sandbox and its other processes run on. The mark it leaves
        tells that exec's result it was stopped."""
        exec_id = valid_exec_id(exec_id)
        try:
            self.state(sandbox_id)
        except SandboxGone:
            return False
        home = self.home(sandbox_id)
        leaders = [
            int(entry.name)
            for entry in (home / "pids").iterdir()
            if exec_id and entry.name.isdigit() and _read(entry) == exec_id
        ]
        if not leaders:
            return False
        (home / "stops").mkdir(exist_ok=True)
        _touch(home / "stops" / exec_id)
        for leader in leaders:
            _kill_group_marked(leader, sandbox_id)
        return True

    def probe(self, sandbox_id: str) -> bool:
        try:
            state = self.state(sandbox_id)
        except SandboxGone:
            return False
        confinement = Confinement.from_dict(state["confinement"])
        init = state.get("init")
        if init and not _init_alive(init):
            return False
        return all(Path(group).is_dir() for group in confinement.groups)

    def close(self, sandbox_id: str) -> None:
        """Kills everything the sandbox started, then forgets it; closing twice is harmless."""
        try:
            state = self.state(sandbox_id)
        except SandboxGone:
            return
        home = self.home(sandbox_id)
        confinement = Confinement.from_dict(state["confinement"])
        # Stop new execs first: without the state file the sandbox no longer exists for them.
        _unlink(home / _STATE_FILE)
        init = state.get("init")
        if init and _init_alive(init):
            # Killing the init of a PID namespace kills every process in it, however it hid.
            with contextlib.suppress(ProcessLookupError):
                os.kill(init["pid"], signal.SIGKILL)
        self.driver.kill(confinement)
        tracked = [int(entry.name) for entry in (home / "pids").iterdir() if entry.name.isdigit()]
        for leader in tracked:
            _kill_group_marked(leader, sandbox_id)
        kill_marked(confinement.member_pids() + marked_pids(sandbox_id), sandbox_id)
        _wait_until_gone(sandbox_id, confinement, self.driver)
        self.driver.destroy(confinement)
        started = _started_inits.pop(sandbox_id, None)
        if started is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                started.wait(timeout=1.0)
        shutil.rmtree(home, ignore_errors=True)

    def sandboxes_older_than(self, seconds: float) -> list[str]:
        limit = time.time() - seconds
        older = []
        for sandbox_id in self.sandboxes():
            with contextlib.suppress(OSError):
                if (self.home(sandbox_id) / _STATE_FILE).stat().st_mtime <= limit:
                    older.append(sandbox_id)
        return older

    def sandboxes(self) -> list[str]:
        if not self.state_dir.is_dir():
            return []
        return sorted(entry.name for entry in self.state_dir.iterdir() if (entry / _STATE_FILE).exists())


def _hand_over(stream, text: str) -> None:
    """The agent's program on its stdin (a few KB: the pipe takes it whole), then EOF."""
    with contextlib.suppress(BrokenPipeError):
        stream.write(text.encode())
    with contextlib.suppress(BrokenPipeError):
        stream.close()


def _until_ready(stream, boundary: Boundary, *, seconds: float) -> bytes | None:
    """None once the init printed its ready line; else what it said before it exited or stayed
    silent past `seconds` (bubblewrap's reason), at most a few KB."""
    deadline = time.monotonic() + seconds
    said = b""
    while len(said) < 4096:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        line = stream.readline() if ready else b""
        if not line:
            return said
        if boundary.is_ready_line(line):
            return None
        said += line
    return said


def _rest(stream) -> bytes:
    """What a killed init left in its pipe (it is closed once the init is gone)."""
    ready, _, _ = select.select([stream], [], [], 1.0)
    return stream.read(4096) if ready else b""


def _read_json(descriptor: int) -> dict | None:
    """bubblewrap's --info-fd document; written before the init's command runs, so already there."""
    data = b""
    while True:
        ready, _, _ = select.select([descriptor], [], [], 1.0)
        if not ready:
            return None
        chunk = os.read(descriptor, 4096)
        if not chunk:
            return None
        data += chunk
        with contextlib.suppress(ValueError):
            return json.loads(data)


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _pid_namespace(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def _init_alive(init: dict) -> bool:
    """The init and the holder execs enter through both still run (the namespace check guards
    against reused pids). Sandbox code can kill the holder (`kill -9 2`) while a background
    process keeps the init waiting: every exec would then fail, so the sandbox counts as gone.
    An exec agent stopped (`kill -STOP 2`) or held by a tracer starts nothing either."""
    namespace = init.get("pidns")
    holder = init.get("holder", init["pid"])
    dead = ("Z", "X", "T", "t") if init.get("agent") else ("Z", "X")
    return (
        bool(namespace)
        and _running_in(int(init["pid"]), namespace, dead=("Z", "X"))
        and _running_in(int(holder), namespace, dead=dead)
    )


def _running_in(pid: int, namespace: str, *, dead: tuple[str, ...]) -> bool:
    """`pid` runs in `namespace`, in none of the `dead` states; a killed process not yet reaped
    (a zombie) still shows the namespace, so its state decides."""
    if _pid_namespace(pid) != namespace:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in dead


def _reap_finished_inits() -> None:
    for sandbox_id, process in list(_started_inits.items()):
        if process.poll() is not None:
            _started_inits.pop(sandbox_id, None)


def _kill_group_marked(leader: int, sandbox_id: str) -> None:
    """SIGKILL to the group of `leader` if it is this sandbox's: through a pidfd taken before the
    marker is checked, so the group killed is the one whose leader was checked."""
    if leader <= 1:
        return
    try:
        handle = os.pidfd_open(leader)
    except OSError:
        return
    try:
        if process_carries_marker(leader, sandbox_id):
            kill_group_through(handle, leader)
    finally:
        os.close(handle)


def _wait_until_gone(
    sandbox_id: str, confinement: Confinement, driver: IsolationDriver, *, seconds: float = 3.0
) -> None:
    """SIGKILL is asynchronous; a kernel cgroup cannot be removed until its last task is reaped."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = marked_pids(sandbox_id) + (confinement.member_pids() if confinement.kernel else [])
        if not alive:
            return
        driver.kill(confinement)
        kill_marked(alive, sandbox_id)
        time.sleep(0.02)


@dataclass
class _Ending:
    """Tells why a command ended (`EndReason`), from what the sandbox's state directory and
    its memory group say after it: a stop mark, its timeout, a sandbox closed under it (its
    state file is gone) or the kernel's out-of-memory kills."""

    home: Path
    exec_id: str
    timeout: float
    state: dict
    ooms_before: int | None = None

    def explained(self, events: Iterator[ExecEvent], ooms: Callable[[], int | None]) -> Iterator[ExecEvent]:
        for event in events:
            if isinstance(event, ExecResult):
                reason, detail = self._reason(event, ooms)
                event = replace(event, reason=reason, reason_detail=detail)
            yield event

    def _reason(self, result: ExecResult, ooms: Callable[[], int | None]) -> tuple[str, str]:
        stop_mark = self.home / "stops" / self.exec_id
        if self.exec_id and stop_mark.exists():
            _unlink(stop_mark)
            return EndReason.STOPPED, "It was stopped before it finished."
        if result.timed_out:
            return EndReason.TIMED_OUT, f"It ran past its time limit of {self.timeout:g} s and was stopped."
        if result.exit_code and not (self.home / _STATE_FILE).exists():
            return EndReason.SANDBOX_CLOSED, "Its sandbox was closed while it ran."
        after = ooms()
        if result.exit_code and after is not None and self.ooms_before is not None and after > self.ooms_before:
            memory = (self.state.get("enforced") or self.state.get("spec") or {}).get("memory_bytes")
            limit = f"its whole memory limit of {format_bytes(memory)}" if memory else "all the memory it may"
            return EndReason.MEMORY_LIMIT, f"The kernel killed it: the sandbox's processes used {limit}."
        return EndReason.EXITED, ""


def valid_exec_id(exec_id: str) -> str:
    """An exec id names a file in the sandbox's state directory: letters, digits, - and _ only."""
    return exec_id if _EXEC_ID.match(exec_id) else ""


def _record(path: Path, text: str) -> None:
    with contextlib.suppress(OSError):
        path.write_text(text)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.touch()


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()

"""The sandbox boundary: bubblewrap namespaces, an unprivileged uid, and how commands enter them.

A sandbox is one long-lived bubblewrap "init" (its own mount, PID, network, IPC, UTS, user and
cgroup namespaces) started when the sandbox opens. Its holder is the exec agent (exec_agent.py),
which forks every exec's command inside those namespaces; where the agent is off, every exec
enters them with `nsenter` and drops to the sandbox's uid and `no_new_privs` with `setpriv` before
the command runs. So all execs of one sandbox share one machine-like view (background processes,
/tmp), and nothing of the host is visible but read-only system directories and the sandbox's
workspace.

Namespace setup is bubblewrap's and util-linux's job; this module only builds their argv.
"""

from __future__ import annotations

import logging
import os
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from workspace.sandboxes.etc_snapshot import ETC_ENTRIES, snapshot_of_etc
from workspace.sandboxes.exec_agent import agent_available
from workspace.sandboxes.reach import closed_dir

logger = logging.getLogger(__name__)

WORKSPACE_MOUNT = "/workspace"
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
# The init prints one line once bubblewrap has set everything up, then holds the namespaces open.
_READY = "ready"
_INIT_SCRIPT = f"echo {_READY}; exec sleep infinity"
# System directories the sandbox sees read-only; anything else of the host is absent.
_SYSTEM_DIRS = ("/usr",)
_MERGED_USR_LINKS = (("usr/bin", "/bin"), ("usr/sbin", "/sbin"), ("usr/lib", "/lib"), ("usr/lib64", "/lib64"))


@dataclass(frozen=True)
class Boundary:
    """How this process confines sandbox commands; `bwrap` empty means no namespaces (DEBUG only)."""

    bwrap: str
    privileged: bool
    uid_base: int
    uid_count: int
    tmp_bytes: int
    # An open sandbox's holder is the exec agent (exec_agent.py), which forks each command inside.
    exec_agent: bool = False
    # Where snapshots of the /etc entries sandboxes see are kept (etc_snapshot.py); None binds each.
    etc_snapshots: Path | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.bwrap)

    def uid_for(self, workspace_id: str) -> int | None:
        """The host uid of the workspace's sandbox code; None when this process cannot switch uid."""
        if not (self.enabled and self.privileged):
            return None
        number = int(workspace_id) if workspace_id.isdigit() else zlib.crc32(workspace_id.encode())
        return self.uid_base + number % self.uid_count

    @property
    def keeps_namespaces(self) -> bool:
        """A root server keeps one set of namespaces per sandbox and enters it for each exec.

        An unprivileged server cannot enter namespaces bubblewrap made (`setns` needs rights in
        namespaces owned by bubblewrap's nested user namespace), so each of its execs gets a fresh
        set that ends with the command: no process outlives its exec.
        """
        return self.enabled and self.privileged

    @property
    def uses_agent(self) -> bool:
        return self.keeps_namespaces and self.exec_agent

    def init_argv(
        self, *, workspace: Path, info_fd: int, uid: int | None, holder: list[str] | None = None
    ) -> list[str]:
        """The argv that creates the namespaces and holds them open until the sandbox closes:
        `holder` (the exec agent, which prints the ready line itself), else a shell that prints
        it and sleeps. With a `uid` it drops to it first (`setpriv`); None where the process that
        execs it dropped already (a warm sandbox's waiter) or cannot switch uid."""
        drop = []
        if uid is not None:
            drop = ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--"]
        return [
            *drop,
            *self._bwrap(workspace),
            "--info-fd",
            str(info_fd),
            "--",
            *(holder or ["/bin/sh", "-c", _INIT_SCRIPT]),
        ]

    def oneshot_argv(self, *, workspace: Path, env: dict[str, str], argv: list[str]) -> list[str]:
        """The argv that runs `argv` in namespaces of its own, torn down when it ends."""
        return [*self._bwrap(workspace), "--die-with-parent", "--", *_clean_env(env), *argv]

    def enter_argv(self, *, holder_pid: int, uid: int | None, argv: list[str]) -> list[str]:
        """The argv that runs `argv` inside an open sandbox, as its uid, with no_new_privs.

        It enters the namespaces of the process holding them open and starts in its working
        directory (/workspace); the caller passes the sandbox's environment, and nothing else,
        to the whole chain.
        """
        # Entering a user namespace sets the ids inside it: root becomes the sandbox uid.
        credentials = ["-S", str(uid), "-G", str(uid)] if uid is not None else ["--preserve-credentials"]
        namespaces = ["--user", "--mount", "--pid", "--net", "--ipc", "--uts", "--cgroup"]
        return [
            "/usr/bin/nsenter",
            "-t",
            str(holder_pid),
            *namespaces,
            *credentials,
            "--wd",
            "--",
            "/usr/bin/setpriv",
            "--no-new-privs",
            "--inh-caps=-all",
            "--",
            *argv,
        ]

    def _bwrap(self, workspace: Path) -> list[str]:
        mounts: list[str] = []
        for directory in _SYSTEM_DIRS:
            mounts += ["--ro-bind-try", directory, directory]
        for target, link in _MERGED_USR_LINKS:
            mounts += ["--symlink", target, link]
        snapshot = snapshot_of_etc(self.etc_snapshots) if self.etc_snapshots else None
        if snapshot is not None:
            mounts += ["--ro-bind", str(snapshot), "/etc"]
        else:
            for name in ETC_ENTRIES:
                mounts += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        return [
            self.bwrap,
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup",
            "--disable-userns",
            "--new-session",
            "--hostname",
            "sandbox",
            *mounts,
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            # /dev itself is a tmpfs as big as half the host's memory: read-only below, with its
            # shared-memory folder a size-limited tmpfs of its own.
            "--size",
            str(self.tmp_bytes),
            "--tmpfs",
            "/dev/shm",
            "--size",
            str(self.tmp_bytes),
            "--tmpfs",
            "/tmp",
            "--bind",
            str(workspace),
            WORKSPACE_MOUNT,
            # The root bubblewrap builds is a tmpfs; made read-only last, so /tmp and /workspace
            # (mounted on top of it) are the only writable places.
            "--remount-ro",
            "/dev",
            "--remount-ro",
            "/",
            "--chdir",
            WORKSPACE_MOUNT,
        ]

    @staticmethod
    def is_ready_line(line: bytes) -> bool:
        return line.strip() == _READY.encode()


def _clean_env(env: dict[str, str]) -> list[str]:
    """`env -i`: the command gets exactly `env`, nothing of the server's environment."""
    return ["/usr/bin/env", "-i", "-C", WORKSPACE_MOUNT, *(f"{key}={value}" for key, value in env.items())]


def untraversable_parent(directory: Path, uid: int | None) -> Path | None:
    """The first parent of `directory` the sandbox uid cannot pass through, if any.

    bubblewrap runs as the sandbox uid and so must reach the workspace by its path: the var
    directory and its parents need the "x" bit for others (0711 keeps them unlistable).
    """
    if uid is None:
        return None
    return closed_dir(directory.resolve().parent, uid)


def configured_boundary() -> Boundary:
    """The boundary the settings ask for; refuses to run without one unless DEBUG is on."""
    wanted = settings.WORKSPACE_SANDBOX_ISOLATION
    if wanted not in ("bwrap", "none"):
        raise ImproperlyConfigured(f"WORKSPACE_SANDBOX_ISOLATION must be 'bwrap' or 'none', not {wanted!r}.")
    binary = ""
    if wanted == "bwrap":
        binary = shutil.which(settings.WORKSPACE_BWRAP) or ""
    if not binary and not settings.DEBUG:
        reason = "is set to 'none'" if wanted == "none" else f"needs bubblewrap at {settings.WORKSPACE_BWRAP}"
        raise ImproperlyConfigured(
            f"The local sandbox backend {reason}; without it sandbox code could read and write the whole "
            "server. Install bubblewrap (Debian: apt-get install bubblewrap) or run with DEBUG on."
        )
    if settings.WORKSPACE_SANDBOX_UID_BASE <= 0 or settings.WORKSPACE_SANDBOX_UID_COUNT <= 0:
        raise ImproperlyConfigured("WORKSPACE_SANDBOX_UID_BASE and WORKSPACE_SANDBOX_UID_COUNT must be positive.")
    return Boundary(
        bwrap=binary,
        privileged=os.geteuid() == 0,
        uid_base=settings.WORKSPACE_SANDBOX_UID_BASE,
        uid_count=settings.WORKSPACE_SANDBOX_UID_COUNT,
        tmp_bytes=settings.WORKSPACE_SANDBOX_TMP_BYTES,
        exec_agent=settings.WORKSPACE_SANDBOX_EXEC_AGENT and agent_available(),
        etc_snapshots=etc_snapshots_dir() if binary else None,
    )


def etc_snapshots_dir() -> Path:
    return Path(settings.WORKSPACE_SANDBOX_ETC_DIR or Path(settings.WORKSPACE_VAR_DIR) / "sandbox-etc")


def boundary_warnings(boundary: Boundary) -> list[str]:
    """What start-up says about a weaker boundary, so nobody relies on what is not there."""
    if not boundary.enabled:
        return [
            "Sandboxes run WITHOUT bubblewrap (DEBUG only): sandbox code can read and write everything "
            "the server can, and reach the network."
        ]
    if not boundary.privileged:
        return [
            "The server is not root: sandbox code runs in bubblewrap namespaces but as the server's uid, "
            "and workspaces are measured after each exec instead of bounded by a mounted image."
        ]
    return []

"""Whether sandbox uids can reach workspaces by path, and where the var directory goes so they can.

bubblewrap runs as the sandbox's uid and binds the workspace by its path, so every directory on
the way to it needs the "x" bit for that uid. A clone under a private directory (root's home is
0700, so is a `mktemp -d` folder) blocks them all; a root server then keeps its var directory in
/var/lib instead. No Django here: settings.py and `make clean` use it before Django is set up.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from pathlib import Path

FALLBACK_PARENT = Path("/var/lib")
# Sandbox uids may pass through the directories the service creates on the way to workspaces,
# but not list them (item ids stay private).
PASSABLE_MODE = 0o711


def closed_dir(path: Path, uid: int | None = None) -> Path | None:
    """The first existing directory from / down to `path` (itself included) that `uid` cannot pass
    through; `uid` None is any uid that neither owns a directory nor is in its group."""
    resolved = path.resolve()
    for directory in [*reversed(resolved.parents), resolved]:
        try:
            info = directory.stat()
        except FileNotFoundError:
            # Not there yet: the service creates it (and what is below) passable.
            return None
        if not _passable(info, uid):
            return directory
    return None


def _passable(info: os.stat_result, uid: int | None) -> bool:
    if uid is not None and info.st_uid == uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if uid is not None and info.st_gid == uid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def default_var_dir(base_dir: Path, *, as_root: bool) -> Path:
    """`<base_dir>/var`, unless a root server's sandbox uids could not pass through `base_dir` or
    a parent of it: then `/var/lib/workspace-<hash of base_dir>`, one per clone. An unprivileged
    server's sandboxes run as the server's own uid, which reaches its own clone."""
    local = base_dir / "var"
    if not as_root or closed_dir(base_dir) is None:
        return local
    digest = hashlib.sha256(str(base_dir.resolve()).encode()).hexdigest()[:12]
    return FALLBACK_PARENT / f"workspace-{digest}"


def unreachable_reason(workspaces: Path, uid: int | None, *, setting: str = "WORKSPACE_VAR_DIR") -> str:
    """One sentence naming the directory that keeps sandbox uid `uid` from the workspaces under
    `workspaces`, and the fix; empty when nothing does or sandboxes keep the server's uid (None)."""
    blocked = None if uid is None else closed_dir(workspaces, uid)
    if blocked is None:
        return ""
    mode = stat.S_IMODE(blocked.stat().st_mode)
    return (
        f"Sandbox code cannot reach its workspaces under {workspaces}: {blocked} is mode {mode:04o} and "
        f"needs the x bit for others (run `chmod o+x {blocked}`, or set {setting} to a directory outside it)."
    )


def passable_dirs(directory: Path) -> None:
    """Creates `directory` and its missing parents with mode 0711, whatever the umask."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            path.mkdir()
            # Only what this call created: an operator's own directory keeps the mode it was given.
            path.chmod(PASSABLE_MODE)

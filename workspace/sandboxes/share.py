"""Proof that a sandbox host and the app see one workspaces tree (DESIGN.md §5 "Many sandbox machines").

A pool's items keep their files on storage the app and every host mount at their workspaces root
(the app's `WORKSPACE_VAR_DIR/workspaces`, a host's `SANDBOX_HOST_WORKSPACES`), so the file API and
the sandbox read one workspace wherever the sandbox runs. Each host proves it at start-up: it
writes a marker file of a random name under its root and reports the name on `/healthz`; the app
looks for that file under its own root, and places nothing on a host whose marker it cannot see.
Both sides bound workspace disk the same way (`WORKSPACE_DISK_ENFORCEMENT`); workspace images are
kernel mounts, seen only on the machine that mounts them, so across machines both measure.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

SHARE_DIR = ".share-check"
_MARKER = re.compile(r"^[0-9a-f]{32}$")
# Where a host keeps the name of the marker it wrote last, to remove it at its next start.
_LAST_MARKER = "share-marker"


def share_marker_written(workspace_root: Path, state_dir: Path) -> str:
    """Writes a new marker under `workspace_root` (removing the one this host wrote before) and
    returns its name, which the host reports."""
    folder = workspace_root / SHARE_DIR
    folder.mkdir(mode=0o711, parents=True, exist_ok=True)
    os.chmod(folder, 0o711)  # passable, not listable, whatever the umask
    last = state_dir / _LAST_MARKER
    try:
        previous = last.read_text().strip()
    except OSError:
        previous = ""
    if _MARKER.match(previous):
        (folder / previous).unlink(missing_ok=True)
    marker = secrets.token_hex(16)
    descriptor = os.open(folder / marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    os.close(descriptor)
    state_dir.mkdir(parents=True, exist_ok=True)
    last.write_text(marker)
    return marker


def machine_id() -> str:
    """This kernel's boot id: two processes that report the same one see the same mounts' kernel."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:64]
    except OSError:
        return ""


def share_report(marker: str, *, disk_enforcement: str) -> dict[str, str]:
    """What a host says of its workspaces on `/healthz`."""
    return {"marker": marker, "disk_enforcement": disk_enforcement, "machine": machine_id()}


def share_problem(reported: Any, workspace_root: Path, *, disk_enforcement: str) -> str:
    """Why a host whose `/healthz` said `reported` of its workspaces does not share the app's (at
    `workspace_root`), or "" when it does."""
    if not isinstance(reported, dict) or not isinstance(reported.get("marker"), str):
        return "it does not report a workspaces marker, so it cannot be shown to share this app's workspaces"
    marker = reported["marker"]
    if not _MARKER.match(marker) or not _is_marker_file(workspace_root / SHARE_DIR / marker):
        return (
            f"its workspaces (SANDBOX_HOST_WORKSPACES) are not this app's: the marker it wrote there is not in "
            f"{workspace_root}. Mount the same shared storage at both."
        )
    theirs = reported.get("disk_enforcement")
    if theirs != disk_enforcement:
        # An image one side mounts over a workspace hides what the other wrote beneath it.
        return (
            f"it bounds workspace disk by {theirs!r} where this app bounds it by {disk_enforcement!r}: set "
            "WORKSPACE_DISK_ENFORCEMENT the same on the app and on every host of the pool."
        )
    if theirs == "image" and reported.get("machine") != machine_id():
        return (
            "it runs on another machine, and workspace images are mounts one machine alone sees: set "
            "WORKSPACE_DISK_ENFORCEMENT=measure on the app and on every host of the pool."
        )
    return ""


def _is_marker_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False

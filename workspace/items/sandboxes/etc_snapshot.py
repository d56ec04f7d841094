"""The host's /etc entries a sandbox sees, copied into one directory that bubblewrap binds in one mount.

bubblewrap reads the mount table again for every read-only bind it makes, so each of the thirteen
/etc entries bound one by one cost about 0.15 ms of every sandbox's start (2.3 ms in all, a
quarter of bubblewrap's time here). A snapshot holds copies of the same entries, with their
modes, owners and symlinks as they are (a symlink stays one: it is never followed to copy what
it names), and without `ssl/private` (keys no sandbox may read, and which are not copied
anywhere). It is named by a digest of what it copied, so a change on the host makes a new one:
the host is looked at again at most every CHECK_SECONDS, and a sandbox keeps the snapshot it
started with. Where no snapshot can be made or reached (a var directory others cannot pass
through), the caller binds each entry as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

# What of the host's /etc a sandbox sees (read-only): the loader's cache, names of users and
# groups, the time zone, MIME types, certificates and Python's configuration.
ETC_ENTRIES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "passwd",
    "group",
    "nsswitch.conf",
    "mime.types",
    "ssl",
    "ca-certificates",
    "python3",
    "python3.11",
)
# Left out of a snapshot wherever it appears below an entry.
_NEVER_COPIED = ("ssl/private",)
CHECK_SECONDS = 60.0


class _Current:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.checked_at: dict[tuple[Path, Path], float] = {}
        self.path: dict[tuple[Path, Path], Path | None] = {}


_current = _Current()


def snapshot_of_etc(
    root: Path, *, source: Path = Path("/etc"), now: Callable[[], float] = time.monotonic
) -> Path | None:
    """The snapshot under `root` of `source`'s entries as they are (looked at again at most every
    CHECK_SECONDS), made when it does not exist yet; None when it cannot be made or reached."""
    key = (root, source)
    with _current.lock:
        checked = _current.checked_at.get(key)
        if checked is not None and now() - checked < CHECK_SECONDS:
            return _current.path[key]
        try:
            path = _made(root, source)
        except OSError as exc:
            logger.warning("sandboxes bind /etc entry by entry: no snapshot of %s in %s (%s)", source, root, exc)
            path = None
        _current.checked_at[key], _current.path[key] = now(), path
        return path


def forget_snapshots() -> None:
    """The next call looks at the host again (tests; `release_sandboxes`)."""
    with _current.lock:
        _current.checked_at.clear()
        _current.path.clear()


def prune_snapshots(root: Path, *, source: Path = Path("/etc")) -> int:
    """Removes every snapshot but the current one; only while no sandbox runs (one keeps the
    snapshot it started with bound). Returns how many it removed."""
    keep = _digest(source)
    removed = 0
    if not root.is_dir():
        return 0
    for entry in root.iterdir():
        if entry.name != keep:
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


def _made(root: Path, source: Path) -> Path | None:
    digest = _digest(source)
    snapshot = root / digest
    if not snapshot.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o711)
        # Closed to others until every copy has its own mode.
        building = root / f".building-{uuid.uuid4().hex}"
        building.mkdir(mode=0o700)
        try:
            for name in ETC_ENTRIES:
                _copy(source / name, building / name, relative=name)
            building.chmod(0o755)
            with contextlib.suppress(FileExistsError, OSError):
                # Another process made the same one meanwhile: theirs stays, this copy goes.
                building.rename(snapshot)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    # bubblewrap runs as the sandbox's uid: it must pass through every parent to bind it.
    if any(not parent.stat().st_mode & stat.S_IXOTH for parent in snapshot.resolve().parents):
        return None
    return snapshot


def _copy(source: Path, target: Path, *, relative: str) -> None:
    if relative in _NEVER_COPIED:
        return
    try:
        info = source.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(source), target)
    elif stat.S_ISDIR(info.st_mode):
        target.mkdir()
        for child in sorted(source.iterdir()):
            _copy(child, target / child.name, relative=f"{relative}/{child.name}")
    elif stat.S_ISREG(info.st_mode):
        try:
            shutil.copyfile(source, target, follow_symlinks=False)
        except PermissionError:
            return  # not readable by this server: no sandbox uid could read it either
    else:
        return  # devices, sockets, fifos: nothing a sandbox needs from /etc
    _same_owner_and_mode(target, info)


def _same_owner_and_mode(target: Path, info: os.stat_result) -> None:
    if os.geteuid() == 0:
        os.chown(target, info.st_uid, info.st_gid, follow_symlinks=False)
    if not stat.S_ISLNK(info.st_mode):
        target.chmod(stat.S_IMODE(info.st_mode))


def _digest(source: Path) -> str:
    """What a snapshot of `source` would hold: each entry's path, type, mode, owner, size and
    modification time, and each symlink's target."""
    digest = hashlib.sha256()
    for relative, info, link in _walk(source):
        fields = (relative, info.st_mode, info.st_uid, info.st_gid, info.st_size, info.st_mtime_ns, link)
        digest.update("\0".join(map(str, fields)).encode() + b"\n")
    return digest.hexdigest()[:32]


def _walk(source: Path) -> Iterator[tuple[str, os.stat_result, str]]:
    pending = [(source / name, name) for name in ETC_ENTRIES]
    while pending:
        path, relative = pending.pop()
        if relative in _NEVER_COPIED:
            continue
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else ""
        yield relative, info, link
        if stat.S_ISDIR(info.st_mode):
            pending.extend((child, f"{relative}/{child.name}") for child in sorted(path.iterdir()))

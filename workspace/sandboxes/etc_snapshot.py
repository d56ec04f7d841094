"""The host's /etc entries a sandbox sees, copied into one directory that bubblewrap binds in one mount.

bubblewrap reads the mount table again for every read-only bind it makes, so each of the thirteen
/etc entries bound one by one cost about 0.15 ms of every sandbox's start (2.3 ms in all, a
quarter of bubblewrap's time here). A snapshot holds copies of the same entries, with their
modes, owners and symlinks as they are (a symlink stays one: it is never followed to copy what
it names), and without `ssl/private` (keys no sandbox may read, and which are not copied
anywhere). It is named by a digest of what it copied, so a change on the host makes a new one:
the host is looked at again at most every CHECK_SECONDS, and a sandbox keeps the snapshot it
started with. Until a snapshot is made (in the background), and where none can be made or
reached (a directory others cannot pass through), the caller binds each entry as before.
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
# A snapshot being copied is a directory of this prefix until it is complete; one older than this
# was left by a process killed halfway.
_BUILDING = ".building-"
BUILDING_SECONDS = 600.0


class _Current:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.checked_at: dict[tuple[Path, Path], float] = {}
        self.path: dict[tuple[Path, Path], Path | None] = {}
        self.building: set[tuple[Path, Path]] = set()


_current = _Current()


def in_background(make: Callable[[], None]) -> None:
    threading.Thread(target=make, name="sandbox-etc-snapshot", daemon=True).start()


def at_once(make: Callable[[], None]) -> None:
    make()


def snapshot_of_etc(
    root: Path,
    *,
    source: Path = Path("/etc"),
    now: Callable[[], float] = time.monotonic,
    build: Callable[[Callable[[], None]], None] = in_background,
) -> Path | None:
    """The snapshot under `root` of `source`'s entries as they are (looked at again at most every
    CHECK_SECONDS); None when there is none yet, or it cannot be made or reached. A missing one is
    made by `build` (a thread of its own: copying takes a fraction of a second, which no open
    should wait for; until it is made, sandboxes bind entry by entry)."""
    key = (root, source)
    with _current.lock:
        checked, known = _current.checked_at.get(key), _current.path.get(key)
        # One removed under this process (by hand, or pruned by another) is looked for again.
        if checked is not None and now() - checked < CHECK_SECONDS and (known is None or known.is_dir()):
            return known
        _current.checked_at[key], _current.path[key] = now(), None
        try:
            digest = _digest(source)
            if not _reachable(root):
                return None
        except OSError as exc:
            logger.warning("sandboxes bind /etc entry by entry: %s cannot be read (%s)", source, exc)
            return None
        if (root / digest).is_dir():
            _current.path[key] = root / digest
            return root / digest
        if key in _current.building:
            return None
        _current.building.add(key)

    def make() -> None:
        try:
            made = _made(root, source, digest)
        except OSError as exc:
            logger.warning("sandboxes bind /etc entry by entry: no snapshot of %s in %s (%s)", source, root, exc)
            made = None
        with _current.lock:
            _current.building.discard(key)
            _current.path[key] = made

    build(make)
    with _current.lock:
        return _current.path[key]


def forget_snapshots() -> None:
    """The next call looks at the host again (tests)."""
    with _current.lock:
        _current.checked_at.clear()
        _current.path.clear()


def prune_snapshots(root: Path, *, source: Path = Path("/etc"), now: Callable[[], float] = time.time) -> int:
    """Removes every snapshot but the one of the host as it is, and what builds killed halfway left
    (older than BUILDING_SECONDS: a younger one may be another process's, still copying). Only
    while no sandbox runs: one keeps the snapshot it started with bound. Returns how many it
    removed."""
    if not root.is_dir():
        return 0
    entries = [entry for entry in root.iterdir() if entry.is_dir()]
    left = [entry for entry in entries if entry.name.startswith(_BUILDING)]
    stale = [entry for entry in left if now() - entry.stat().st_mtime > BUILDING_SECONDS]
    snapshots = [entry for entry in entries if entry not in left]
    if len(snapshots) > 1:
        current = _digest(source)
        stale += [entry for entry in snapshots if entry.name != current]
    for entry in stale:
        shutil.rmtree(entry, ignore_errors=True)
    return len(stale)


def _reachable(root: Path) -> bool:
    """bubblewrap runs as the sandbox's uid: it must pass through every parent to bind a snapshot."""
    existing = root if root.exists() else next(parent for parent in root.parents if parent.exists())
    return all(parent.stat().st_mode & stat.S_IXOTH for parent in [existing.resolve(), *existing.resolve().parents])


def _made(root: Path, source: Path, digest: str) -> Path:
    snapshot = root / digest
    if snapshot.is_dir():
        return snapshot
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o711)
    # Closed to others until every copy has its own mode.
    building = root / f"{_BUILDING}{uuid.uuid4().hex}"
    building.mkdir(mode=0o700)
    try:
        for name in ETC_ENTRIES:
            _copy(source / name, building / name, relative=name)
        building.chmod(0o755)
        with contextlib.suppress(OSError):
            # Another process made the same one meanwhile: theirs stays, this copy goes.
            building.rename(snapshot)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    if not snapshot.is_dir():
        raise OSError(f"{snapshot} was not made")
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

"""Each workspace directory: safe path resolution, atomic writes, and the write-check hook.

Every change in size passes through `check_write`, the one place the disk quotas hook into.
A write lands in a temp file next to its target, is fsynced, checked, and only then renamed
over the old file, so a refused or failed write leaves the old bytes intact.

What sandbox code leaves here is hostile input (docs/ARCHITECTURE.md §5): only regular files and
folders are ever opened, and never in a way that can wait (a FIFO, a socket, a device is refused),
every walk is iterative and bounded, and a name that is not UTF-8 is shown escaped.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import secrets
import stat
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from collab.errors import Conflict, DomainError, Invalid, NotFound, QuotaExceeded, TooLarge
from collab.sizes import format_bytes
from workspace.sandboxes import beneath
from workspace.sandboxes.boundary import configured_boundary
from workspace.sandboxes.volumes import workspace_prepare, workspaces_root

logger = logging.getLogger(__name__)

CHUNK = 1024 * 1024
MAX_LISTED = 5000
# A measurement reads at most this many entries (about a second): sandbox code can make millions.
MAX_MEASURED = 1_000_000
_TEMP_PREFIX = ".ws-tmp-"
# New files are the workspace owner's alone (its folder is 0700 too); sandbox code runs as that owner.
_FILE_MODE = 0o600
# The filesystem's own limits (NAME_MAX, PATH_MAX less the workspace's prefix).
_MAX_NAME_BYTES = 255
_MAX_PATH_BYTES = 3072


@dataclass(frozen=True)
class FileChange:
    path: str
    old_size: int
    new_size: int


@dataclass(frozen=True)
class WriteIntent:
    """What a write would do to a workspace, handed to every registered check."""

    workspace: WorkspaceRef
    changes: tuple[FileChange, ...]

    @property
    def delta(self) -> int:
        return sum(change.new_size - change.old_size for change in self.changes)

    @property
    def attempted(self) -> int:
        return sum(change.new_size for change in self.changes)


@dataclass(frozen=True)
class FileEntry:
    path: str  # a name that is not UTF-8 shows its bytes escaped (`\\xff`), and no path names it
    size: int
    is_dir: bool
    modified: datetime

    @property
    def name(self) -> str:
        """The last part of its path: what a folder's listing shows."""
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class WorkspaceRef:
    """A workspace as the file store knows it: its id, the disk limit its image holds it to, and
    how a refusal names it. Whoever owns workspaces may hand a subclass carrying its own facts:
    the file store passes it on to the write checks that owner registered, unread."""

    workspace_id: int | str
    limit_bytes: int | None = None  # None: no limit of its own
    title: str = ""  # how a refusal names the workspace

    @property
    def root(self) -> Path:
        return workspace_prepared(self.workspace_id, limit_bytes=self.limit_bytes)


WriteCheck = Callable[[WriteIntent], None]
_write_checks: list[WriteCheck] = []


def register_write_check(check: WriteCheck) -> None:
    """Adds a check (the quota layer's disk gates) run for every write that grows a workspace."""
    if check not in _write_checks:
        _write_checks.append(check)


def unregister_write_check(check: WriteCheck) -> None:
    if check in _write_checks:
        _write_checks.remove(check)


WriteHeadroom = Callable[[WriteIntent], "int | None"]
_write_headrooms: list[WriteHeadroom] = []


def register_write_headroom(headroom: WriteHeadroom) -> None:
    """Adds a limit's answer to "how much more may this write grow" (None: no limit binds it)."""
    if headroom not in _write_headrooms:
        _write_headrooms.append(headroom)


@dataclass
class _StreamBudget:
    """Cuts an upload off at most one chunk past the quota instead of storing it whole first.

    The limits are asked once, when the upload passes its first chunk (small writes never ask);
    from then on each chunk is compared with that answer, and passing it runs the full check,
    which refuses with the exact 507.
    """

    ref: WorkspaceRef
    allowed_until: int | None = None
    asked: bool = False

    def after_chunk(self, change: FileChange) -> None:
        if change.new_size <= CHUNK or not _write_headrooms:
            return
        intent = WriteIntent(self.ref, (change,))
        if not self.asked:
            self.asked = True
            rooms = [room for room in (headroom(intent) for headroom in _write_headrooms) if room is not None]
            self.allowed_until = change.new_size + min(rooms) if rooms else None
        if self.allowed_until is not None and change.new_size > self.allowed_until:
            check_write(intent)
            self.allowed_until = None  # the limits moved meanwhile and admit it: the final check decides


@contextlib.contextmanager
def workspace_write_lock(workspace_id: int | str) -> Iterator[None]:
    """One write into a workspace at a time (across threads and processes), so each write's quota
    check sees every write before it landed and none still in flight."""
    locks = workspaces_root() / ".locks"
    locks.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(locks / f"{workspace_id}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def check_write(intent: WriteIntent) -> None:
    """The one place every size change is reported; a check refuses by raising (507).

    Shrinking, same-size overwrites and deletes always pass (spec "Errors" rule 2), so the
    checks only see growth.
    """
    if intent.delta <= 0:
        return
    for check in list(_write_checks):
        check(intent)


def workspace_dir(workspace_id: int | str) -> Path:
    return workspaces_root() / str(workspace_id)


def workspace_prepared(workspace_id: int | str, *, limit_bytes: int | None) -> Path:
    """The workspace, mounted on an image of `limit_bytes` where images are used."""
    return workspace_prepare(
        workspace_dir(workspace_id),
        limit_bytes=limit_bytes,
        uid=configured_boundary().uid_for(str(workspace_id)),
    )


def max_file_bytes() -> int:
    return settings.WORKSPACE_MAX_FILE_BYTES


def invalid_path(path: str, why: str) -> Invalid:
    return Invalid(error="invalid_path", detail=f"{path!r} {why}.", path=path)


def resolve(root: Path, path: str) -> Path:
    """The absolute path of `path` inside `root`; anything escaping it is a 400 `invalid_path`.

    `..` and absolute paths are refused by name; symlinks are caught by resolving the real path
    and checking it still lies under the workspace.
    """
    if not path or "\x00" in path or "\\" in path or not _is_utf8(path):
        raise invalid_path(shown_name(path), "is not a usable path")
    if path.startswith("/"):
        raise invalid_path(path, "is absolute; paths are relative to the workspace")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if any(part == ".." for part in parts):
        raise invalid_path(path, "climbs out of the workspace with '..'")
    if not parts:
        raise invalid_path(path, "names the workspace itself, not a file")
    if len(path.encode()) > _MAX_PATH_BYTES or any(len(part.encode()) > _MAX_NAME_BYTES for part in parts):
        raise invalid_path(path, f"is too long (names up to {_MAX_NAME_BYTES} bytes, paths up to {_MAX_PATH_BYTES})")
    if any(part.startswith(_TEMP_PREFIX) for part in parts):
        raise invalid_path(path, "uses a name the file store reserves")
    candidate = root.joinpath(*parts)
    real_root = os.path.realpath(root)
    real = os.path.realpath(candidate)
    if real != real_root and not real.startswith(real_root + os.sep):
        raise invalid_path(path, "leads out of the workspace through a symlink")
    return candidate


def relative(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _is_utf8(name: str) -> bool:
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


def shown_name(name: str) -> str:
    """`name` as text a page or JSON can carry: bytes that are not UTF-8 (surrogates from the
    filesystem) are escaped as `\\xff`, which the file API then refuses by its backslash."""
    return name if _is_utf8(name) else name.encode(errors="surrogateescape").decode(errors="backslashreplace")


def charged_bytes(info: os.stat_result) -> int:
    """What an entry takes on disk, never more than its length: a sparse file counts the blocks
    it holds (a 10 GB hole costs nothing), a folder nothing, any other file its bytes."""
    if stat.S_ISDIR(info.st_mode):
        return 0
    return min(info.st_size, info.st_blocks * 512)


class Walk:
    """Every entry below an open folder, breadth first: a folder's own entries (by name when
    `sorted`) before those below it, their paths relative to it.

    Built for folders that sandbox code may be changing: nothing is opened but folders (without
    blocking, never through a symlink, never out of the start), entries are read with `lstat`,
    there is no recursion however deep the folders go, and at most `most` entries are read.
    `complete` says afterwards whether the walk saw everything.
    """

    def __init__(self, start_fd: int, *, most: int, sorted_by_name: bool = False) -> None:
        self.start_fd, self.most, self.sorted_by_name = start_fd, most, sorted_by_name
        self.complete = True

    def __iter__(self) -> Iterator[tuple[str, os.stat_result]]:
        pending, seen = deque([""]), 0
        while pending:
            folder = pending.popleft()
            for name, info in self._entries(folder, self.most - seen):
                seen += 1
                path = f"{folder}/{name}" if folder else name
                if stat.S_ISDIR(info.st_mode):
                    pending.append(path)
                yield path, info
            if seen >= self.most:
                self.complete = False
                return

    def _entries(self, folder: str, most: int) -> Iterable[tuple[str, os.stat_result]]:
        try:
            descriptor = beneath.open_at(self.start_fd, folder or ".", _FOLDER_FLAGS, follow_symlinks=False)
        except OSError:
            # Gone, swapped for a symlink or a file meanwhile, or deeper than a path can name.
            self.complete = False
            return ()
        entries = _folder_entries(descriptor, most)
        return sorted(entries) if self.sorted_by_name else entries


_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK


def _folder_entries(descriptor: int, most: int) -> Iterator[tuple[str, os.stat_result]]:
    """Up to `most` (name, lstat) pairs of the open folder, which this closes."""
    try:
        with os.scandir(descriptor) as scan:
            for count, entry in enumerate(scan):
                if count >= most:
                    return
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                yield entry.name, info
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def opened_folder(root: Path, path: str = "") -> Iterator[int]:
    """The workspace (or `path` inside it, through symlinks that stay inside) as an open folder."""
    try:
        descriptor = (
            beneath.open_beneath(root, path, _FOLDER_FLAGS)
            if path
            else os.open(root, _FOLDER_FLAGS | os.O_CLOEXEC | os.O_NOFOLLOW)
        )
    except beneath.Escape as exc:
        raise invalid_path(path, "leads out of the workspace through a symlink") from exc
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise _not_found(path) from exc
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def list_files(root: Path, *, limit: int = MAX_LISTED) -> list[FileEntry]:
    """Files and folders under the workspace, sorted by path; symlinks are listed, never followed.

    At most `limit` entries (a folder's own entries before those below it); the walk reads at
    most twice that many, so a folder of a million names is never read whole for a page.
    """
    if not root.is_dir():
        return []
    entries: list[FileEntry] = []
    with opened_folder(root) as start:
        for path, info in Walk(start, most=2 * limit, sorted_by_name=True):
            if path.rsplit("/", 1)[-1].startswith(_TEMP_PREFIX):
                continue
            is_dir = stat.S_ISDIR(info.st_mode)
            modified = datetime.fromtimestamp(info.st_mtime, tz=UTC)
            entries.append(FileEntry(shown_name(path), 0 if is_dir else info.st_size, is_dir, modified))
            if len(entries) >= limit:
                break
    return sorted(entries, key=lambda entry: entry.path)


def list_folder(root: Path, folder: str = "", *, limit: int = MAX_LISTED) -> list[FileEntry]:
    """The files and folders directly in `folder` (the workspace when blank), folders first, then
    by name; at most `limit`, read from at most twice that many entries (a folder of a million
    names is never read whole for a page). A folder that is not there, or a file, is a 404."""
    if not root.is_dir():
        return []
    shown = relative(root, resolve(root, folder)) if folder.strip() else ""
    shown = "" if shown == "." else shown
    try:
        with opened_folder(root, shown) as start:
            found = list(_folder_entries(os.dup(start), 2 * limit))
    except DomainError as exc:
        if exc.error != "file_not_found":
            raise
        raise NotFound(error="folder_not_found", detail=f"There is no folder {folder!r}.", path=folder) from exc
    prefix = f"{shown}/" if shown else ""
    entries = [
        FileEntry(
            shown_name(prefix + name),
            0 if stat.S_ISDIR(info.st_mode) else info.st_size,
            stat.S_ISDIR(info.st_mode),
            datetime.fromtimestamp(info.st_mtime, tz=UTC),
        )
        for name, info in found
        if not name.startswith(_TEMP_PREFIX)
    ]
    entries.sort(key=lambda entry: (not entry.is_dir, entry.path))
    return entries[:limit]


def regular_files(root: Path, folder: str = "", *, most: int = MAX_LISTED) -> Iterator[tuple[str, int]]:
    """(path relative to `folder`, length) of the regular files below it that the file API can
    name, for the batch: FIFOs, sockets, devices and symlinks are left out, and so are names
    that are not UTF-8 and temp files of writes in flight."""
    with opened_folder(root, folder) as start:
        for path, info in Walk(start, most=most, sorted_by_name=True):
            name = path.rsplit("/", 1)[-1]
            if stat.S_ISREG(info.st_mode) and not name.startswith(_TEMP_PREFIX) and _is_utf8(path):
                yield path, info.st_size


def workspace_bytes(root: Path) -> int:
    """The disk the workspace takes: each entry's `charged_bytes`, found by a bounded `Walk`
    (symlinks count as themselves, not their targets; FIFOs, sockets and devices as nothing)."""
    try:
        start = os.open(root, _FOLDER_FLAGS | os.O_CLOEXEC | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    try:
        walk = Walk(start, most=MAX_MEASURED)
        total = sum(charged_bytes(info) for _path, info in walk)
    finally:
        os.close(start)
    if not walk.complete:
        logger.warning("%s holds more than a measurement reads (%d entries); counted up to there", root, MAX_MEASURED)
    return total


def _not_found(path: str) -> NotFound:
    return NotFound(error="file_not_found", detail=f"There is no file {path!r}.", path=path)


def not_regular(path: str, mode: int) -> Invalid:
    """A FIFO, socket or device where the file API expected a file (sandbox code can make them)."""
    what = next((name for test, name in _OTHER_KINDS if test(mode)), "special file")
    return Invalid(
        error="not_a_regular_file",
        detail=f"{path!r} is a {what}, not a regular file; the file API opens only files and folders.",
        path=path,
    )


_OTHER_KINDS = (
    (stat.S_ISFIFO, "FIFO (named pipe)"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def _unopenable(path: str, exc: OSError) -> Invalid:
    """A socket (ENXIO), a device on a nodev mount (EACCES), a symlink loop, a file sandbox code
    made unreadable: each a refusal of that file, none an error of the server."""
    return Invalid(
        error="not_a_regular_file" if exc.errno in (errno.ENXIO, errno.ENODEV) else "file_unreadable",
        detail=f"{path!r} cannot be opened as a file ({os.strerror(exc.errno or 0)}).",
        path=path,
    )


def _is_directory(path: str) -> Invalid:
    return Invalid(error="is_directory", detail=f"{path!r} is a folder, not a file.", path=path)


def read_file(root: Path, path: str) -> Path:
    """The file to send back; missing is 404, a folder or a FIFO, socket or device is 400. Open
    it with `open_read`, which checks again on what it actually opened."""
    target = resolve(root, path)
    try:
        mode = target.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise _not_found(path) from None
    except OSError as exc:
        raise _unopenable(path, exc) from exc
    if stat.S_ISDIR(mode):
        raise _is_directory(path)
    if not stat.S_ISREG(mode):
        raise not_regular(path, mode)
    return target


def open_read(root: Path, target: Path) -> BinaryIO:
    """`target` (from `read_file`) opened for reading, never outside `root` whatever changed since.

    Opened without blocking and checked on the descriptor itself: a file that became a FIFO
    since it was checked is refused, not waited on.
    """
    path = relative(root, target)
    try:
        descriptor = beneath.open_beneath(root, path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except beneath.Escape as exc:
        raise invalid_path(path, "leads out of the workspace through a symlink") from exc
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise _not_found(path) from exc
    except OSError as exc:
        raise _unopenable(path, exc) from exc
    try:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):
            raise _is_directory(path)
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode)
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "rb")


def iter_file(root: Path, target: Path) -> Iterator[bytes]:
    with open_read(root, target) as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


@dataclass
class StagedFile:
    """A finished temp file waiting to replace its target, both named inside one open folder."""

    folder_fd: int
    name: str
    temp_name: str
    change: FileChange

    def commit(self) -> None:
        try:
            os.replace(self.temp_name, self.name, src_dir_fd=self.folder_fd, dst_dir_fd=self.folder_fd)
            os.fsync(self.folder_fd)
        finally:
            os.close(self.folder_fd)

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.temp_name, dir_fd=self.folder_fd)
            os.close(self.folder_fd)


def stage(root: Path, path: str, chunks: Iterable[bytes], *, budget: _StreamBudget | None = None) -> StagedFile:
    """Writes `chunks` to a temp file beside the target, fsynced; the target is untouched so far."""
    target = resolve(root, path)
    if target.is_dir():
        raise _is_directory(path)
    folder_fd, name = _open_folder(root, target, path, create=True)
    try:
        existing = _lstat(folder_fd, name)
        # What the old file holds on disk: filling a sparse file with data is growth.
        old_size = charged_bytes(existing) if existing and stat.S_ISREG(existing.st_mode) else 0
        temp_name = f"{_TEMP_PREFIX}{secrets.token_hex(8)}"
        change_so_far = FileChange(relative(root, target), old_size, 0)
        with _kernel_full(change_so_far):  # no inode left
            handle = os.open(
                temp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder_fd
            )
    except BaseException:
        os.close(folder_fd)
        raise
    try:
        _give_to_sandbox(root, handle)
        os.fchmod(handle, stat.S_IMODE(existing.st_mode) if existing and stat.S_ISREG(existing.st_mode) else _FILE_MODE)
        limit = max_file_bytes()
        written = 0
        out = os.fdopen(handle, "wb")
        try:
            for chunk in chunks:
                written += len(chunk)
                if written > limit:
                    raise TooLarge(error="file_too_large", detail=f"A file may hold at most {limit} bytes.")
                change_so_far = FileChange(change_so_far.path, old_size, written)
                with _kernel_full(change_so_far):
                    out.write(chunk)
                if budget is not None:
                    budget.after_chunk(change_so_far)
            with _kernel_full(change_so_far):
                out.flush()
                os.fsync(out.fileno())
        finally:
            # After a full disk, closing would try the same flush again and hide the real reason.
            with contextlib.suppress(OSError):
                out.close()
    except BaseException:
        StagedFile(folder_fd, name, temp_name, change_so_far).discard()
        raise
    return StagedFile(folder_fd=folder_fd, name=name, temp_name=temp_name, change=change_so_far)


def _open_folder(root: Path, target: Path, path: str, *, create: bool) -> tuple[int, str]:
    """The open folder of `target` and its name there; made (for the sandbox's uid) when `create`."""
    try:
        with _kernel_full(FileChange(relative(root, target), 0, 0)):  # no room for a folder on the way
            return beneath.open_parent(
                root, relative(root, target), on_created=(lambda fd: _give_to_sandbox(root, fd)) if create else None
            )
    except beneath.Escape as exc:
        raise invalid_path(path, "leads out of the workspace through a symlink") from exc
    except (NotADirectoryError, FileExistsError) as exc:
        raise invalid_path(path, "goes through a file as if it were a folder") from exc
    except FileNotFoundError as exc:
        raise _not_found(path) from exc


def _lstat(folder_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


class DiskFull(Exception):
    """The workspace's image ran out of space while a write was staged (the kernel's bound)."""

    def __init__(self, change: FileChange) -> None:
        super().__init__(f"no space left for {change.path}")
        self.change = change


@contextlib.contextmanager
def _kernel_full(change: FileChange) -> Iterator[None]:
    """The image's bound (no block or inode left) inside becomes DiskFull, answered as a 507."""
    try:
        yield
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFull(change) from exc
        raise


def refuse_full(ref: WorkspaceRef, changes: tuple[FileChange, ...]) -> QuotaExceeded:
    """The 507 for a write the kernel refused: the quota checks' own answer when they refuse it,
    else the workspace limit's, since the image is what filled up."""
    check_write(WriteIntent(ref, changes))
    quota = ref.limit_bytes or 0
    attempted = sum(change.new_size for change in changes)
    whose = f"The workspace of “{ref.title}”" if ref.title else f"Item {ref.workspace_id}'s workspace"
    return QuotaExceeded(
        error="workspace_quota_exceeded",
        detail=f"{whose} is full: its limit is {format_bytes(quota)}. Delete or shrink files to make room.",
        dimension="disk",
        used=workspace_bytes(ref.root),
        quota=quota,
        attempted=attempted,
    )


def _give_to_sandbox(root: Path, descriptor: int) -> None:
    """What the file API creates belongs to the workspace's owner (the sandbox uid), so sandbox
    code can change it like its own files; a server that is not root owns everything anyway."""
    if os.geteuid() != 0:
        return
    owner = root.stat()
    if owner.st_uid != 0:
        os.fchown(descriptor, owner.st_uid, owner.st_gid)


def write_file(ref: WorkspaceRef, path: str, chunks: Iterable[bytes]) -> FileChange:
    with workspace_write_lock(ref.workspace_id):
        try:
            staged = stage(ref.root, path, chunks, budget=_StreamBudget(ref))
        except DiskFull as full:
            raise refuse_full(ref, (full.change,)) from full
        try:
            check_write(WriteIntent(ref, (staged.change,)))
            staged.commit()
        except BaseException:
            staged.discard()
            raise
    return staged.change


def move_path(ref: WorkspaceRef, source: str, target: str) -> FileChange:
    """Renames a file or folder inside the workspace; it never overwrites (409 `path_exists`).

    No quota is involved: the bytes stay where they are. Missing folders on the way to the new
    name are made, as a write would.
    """
    root = ref.root
    source_path, target_path = resolve(root, source), resolve(root, target)
    if target_path == source_path or source_path in target_path.parents:
        raise invalid_path(target, "lies inside what is being moved")
    with workspace_write_lock(ref.workspace_id):
        source_fd, source_name = _open_folder(root, source_path, source, create=False)
        try:
            info = _lstat(source_fd, source_name)
            if info is None:
                raise _not_found(source)
            try:
                target_fd, target_name = _open_folder(root, target_path, target, create=True)
            except DiskFull as full:
                raise refuse_full(ref, (full.change,)) from full
            try:
                if _lstat(target_fd, target_name) is not None:
                    raise Conflict(error="path_exists", detail=f"{target!r} already exists.")
                os.rename(source_name, target_name, src_dir_fd=source_fd, dst_dir_fd=target_fd)
                os.fsync(target_fd)
                os.fsync(source_fd)
            finally:
                os.close(target_fd)
        finally:
            os.close(source_fd)
    size = charged_bytes(info)
    return FileChange(relative(root, target_path), size, size)


def make_folder(ref: WorkspaceRef, path: str) -> FileChange:
    """A new empty folder (and any missing ones above it); one that exists is a 409."""
    root = ref.root
    target = resolve(root, path)
    change = FileChange(relative(root, target), 0, 0)
    try:
        folder_fd, name = _open_folder(root, target, path, create=True)
    except DiskFull as full:
        raise refuse_full(ref, (full.change,)) from full
    try:
        try:
            with _kernel_full(change):
                os.mkdir(name, 0o700, dir_fd=folder_fd)
        except FileExistsError as exc:
            raise Conflict(error="path_exists", detail=f"{path!r} already exists.") from exc
        except DiskFull as full:
            raise refuse_full(ref, (full.change,)) from full
        made = beneath.open_beneath(root, relative(root, target), os.O_RDONLY | os.O_DIRECTORY)
        try:
            _give_to_sandbox(root, made)
        finally:
            os.close(made)
    finally:
        os.close(folder_fd)
    return change


def truncate_file(ref: WorkspaceRef, path: str, size: int) -> FileChange:
    """Cuts a file down to its first `size` bytes (0 empties it): a shrink, so always allowed,
    even over quota, and it writes nothing new. Larger than the file is a 400, never growth."""
    root = ref.root
    target = resolve(root, path)
    with workspace_write_lock(ref.workspace_id):
        folder_fd, name = _open_folder(root, target, path, create=False)
        try:
            try:
                descriptor = os.open(name, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder_fd)
            except FileNotFoundError as exc:
                raise _not_found(path) from exc
            except IsADirectoryError as exc:
                raise _is_directory(path) from exc
            except OSError as exc:
                raise _unopenable(path, exc) from exc
        finally:
            os.close(folder_fd)
        try:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode):
                raise not_regular(path, info.st_mode)
            if size > info.st_size:
                raise Invalid(
                    error="not_a_shrink",
                    detail=f"{path!r} holds {info.st_size} bytes; it can only be cut to fewer, not to {size}.",
                    path=path,
                )
            os.ftruncate(descriptor, size)
            change = FileChange(relative(root, target), charged_bytes(info), charged_bytes(os.fstat(descriptor)))
        finally:
            os.close(descriptor)
    return change


def delete_path(ref: WorkspaceRef, path: str) -> FileChange:
    """Deletes a file or an empty folder; always allowed, still reported as a (negative) change."""
    root = ref.root
    target = resolve(root, path)
    folder_fd, name = _open_folder(root, target, path, create=False)
    try:
        info = _lstat(folder_fd, name)
        if info is None:
            raise _not_found(path)
        if stat.S_ISDIR(info.st_mode):
            try:
                os.rmdir(name, dir_fd=folder_fd)
            except OSError as exc:
                raise Conflict(error="folder_not_empty", detail=f"{path!r} is not empty.") from exc
            return FileChange(relative(root, target), 0, 0)
        change = FileChange(relative(root, target), charged_bytes(info), 0)
        check_write(WriteIntent(ref, (change,)))
        os.unlink(name, dir_fd=folder_fd)
        return change
    finally:
        os.close(folder_fd)

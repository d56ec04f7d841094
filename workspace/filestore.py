"""Each item's workspace directory: safe path resolution, atomic writes, and the write-check hook.

Every change in size passes through `check_write`, the one place the disk quotas hook into.
A write lands in a temp file next to its target, is fsynced, checked, and only then renamed
over the old file, so a refused or failed write leaves the old bytes intact.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

from collab.errors import ApiError

CHUNK = 1024 * 1024
MAX_LISTED = 5000
_TEMP_PREFIX = ".ws-tmp-"


@dataclass(frozen=True)
class FileChange:
    path: str
    old_size: int
    new_size: int


@dataclass(frozen=True)
class WriteIntent:
    """What a write would do to an item's workspace, handed to every registered check."""

    item_id: int
    app_slug: str
    owner: str
    changes: tuple[FileChange, ...]

    @property
    def delta(self) -> int:
        return sum(change.new_size - change.old_size for change in self.changes)

    @property
    def attempted(self) -> int:
        return sum(change.new_size for change in self.changes)


@dataclass(frozen=True)
class FileEntry:
    path: str
    size: int
    is_dir: bool
    modified: datetime


@dataclass(frozen=True)
class WorkspaceRef:
    """The item facts the file store needs; built from an Item so no query happens here."""

    item_id: int
    app_slug: str
    owner: str

    @property
    def root(self) -> Path:
        return workspace_dir(self.item_id)


WriteCheck = Callable[[WriteIntent], None]
_write_checks: list[WriteCheck] = []


def register_write_check(check: WriteCheck) -> None:
    """Adds a check (the quota layer's disk gates) run for every write that grows a workspace."""
    if check not in _write_checks:
        _write_checks.append(check)


def unregister_write_check(check: WriteCheck) -> None:
    if check in _write_checks:
        _write_checks.remove(check)


def check_write(intent: WriteIntent) -> None:
    """The one place every size change is reported; a check refuses by raising (507).

    Shrinking, same-size overwrites and deletes always pass (spec "Errors" rule 2), so the
    checks only see growth.
    """
    if intent.delta <= 0:
        return
    for check in list(_write_checks):
        check(intent)


def workspaces_root() -> Path:
    return Path(getattr(settings, "WORKSPACE_VAR_DIR", "var")) / "workspaces"


def workspace_dir(item_id: int | str) -> Path:
    return workspaces_root() / str(item_id)


def max_file_bytes() -> int:
    return int(getattr(settings, "WORKSPACE_MAX_FILE_BYTES", 256 * 1024 * 1024))


def invalid_path(path: str, why: str) -> ApiError:
    return ApiError(status_code=400, error="invalid_path", detail=f"{path!r} {why}.", path=path)


def resolve(root: Path, path: str) -> Path:
    """The absolute path of `path` inside `root`; anything escaping it is a 400 `invalid_path`.

    `..` and absolute paths are refused by name; symlinks are caught by resolving the real path
    and checking it still lies under the workspace.
    """
    if not path or "\x00" in path or "\\" in path:
        raise invalid_path(path, "is not a usable path")
    if path.startswith("/"):
        raise invalid_path(path, "is absolute; paths are relative to the workspace")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if any(part == ".." for part in parts):
        raise invalid_path(path, "climbs out of the workspace with '..'")
    if not parts:
        raise invalid_path(path, "names the workspace itself, not a file")
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


def list_files(root: Path) -> list[FileEntry]:
    """Files and folders under the workspace, sorted by path; symlinks are listed, never followed."""
    if not root.is_dir():
        return []
    entries: list[FileEntry] = []
    for current, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            if name.startswith(_TEMP_PREFIX):
                continue
            full = Path(current) / name
            try:
                info = full.lstat()
            except FileNotFoundError:
                continue
            is_dir = name in dirs and not full.is_symlink()
            modified = datetime.fromtimestamp(info.st_mtime, tz=UTC)
            entries.append(FileEntry(relative(root, full), 0 if is_dir else info.st_size, is_dir, modified))
            if len(entries) >= MAX_LISTED:
                return sorted(entries, key=lambda entry: entry.path)
    return sorted(entries, key=lambda entry: entry.path)


def workspace_bytes(root: Path) -> int:
    """Bytes of the regular files under `root` (symlinks count as themselves, not their targets)."""
    total = 0
    stack = [root]
    while stack:
        try:
            with os.scandir(stack.pop()) as scan:
                for entry in scan:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    else:
                        total += entry.stat(follow_symlinks=False).st_size
        except (FileNotFoundError, NotADirectoryError):
            continue
    return total


def read_file(root: Path, path: str) -> Path:
    """The file to send back; missing is 404, a folder is 400."""
    target = resolve(root, path)
    if target.is_dir():
        raise ApiError(status_code=400, error="is_directory", detail=f"{path!r} is a folder, not a file.", path=path)
    if not target.is_file():
        raise ApiError(status_code=404, error="file_not_found", detail=f"There is no file {path!r}.", path=path)
    return target


def _size_of(target: Path) -> int:
    try:
        return target.stat().st_size if target.is_file() else 0
    except FileNotFoundError:
        return 0


@dataclass
class StagedFile:
    """A finished temp file waiting to replace its target."""

    target: Path
    temp: Path
    change: FileChange

    def commit(self) -> None:
        os.replace(self.temp, self.target)
        _fsync_dir(self.target.parent)

    def discard(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.temp.unlink()


def stage(root: Path, path: str, chunks: Iterable[bytes]) -> StagedFile:
    """Writes `chunks` to a temp file beside the target, fsynced; the target is untouched so far."""
    target = resolve(root, path)
    if target.is_dir():
        raise ApiError(status_code=400, error="is_directory", detail=f"{path!r} is a folder.", path=path)
    _make_parents(root, target, path)
    old_size = _size_of(target)
    handle, temp_name = tempfile.mkstemp(prefix=_TEMP_PREFIX, dir=target.parent)
    temp = Path(temp_name)
    limit = max_file_bytes()
    written = 0
    try:
        with os.fdopen(handle, "wb") as out:
            for chunk in chunks:
                written += len(chunk)
                if written > limit:
                    raise ApiError(
                        status_code=413, error="file_too_large", detail=f"A file may hold at most {limit} bytes."
                    )
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if target.exists():
            os.chmod(temp, target.stat().st_mode & 0o777)
        else:
            os.chmod(temp, 0o644)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return StagedFile(
        target=target, temp=temp, change=FileChange(path=relative(root, target), old_size=old_size, new_size=written)
    )


def _make_parents(root: Path, target: Path, path: str) -> None:
    parent = target.parent
    if parent.exists() and not parent.is_dir():
        raise invalid_path(path, "goes through a file as if it were a folder")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise invalid_path(path, "goes through a file as if it were a folder") from exc


def write_file(ref: WorkspaceRef, path: str, chunks: Iterable[bytes]) -> FileChange:
    staged = stage(ref.root, path, chunks)
    try:
        check_write(WriteIntent(ref.item_id, ref.app_slug, ref.owner, (staged.change,)))
        staged.commit()
    except BaseException:
        staged.discard()
        raise
    return staged.change


def delete_path(ref: WorkspaceRef, path: str) -> FileChange:
    """Deletes a file or an empty folder; always allowed, still reported as a (negative) change."""
    target = resolve(ref.root, path)
    if target.is_symlink() or target.is_file():
        change = FileChange(relative(ref.root, target), target.lstat().st_size, 0)
        check_write(WriteIntent(ref.item_id, ref.app_slug, ref.owner, (change,)))
        target.unlink()
        return change
    if target.is_dir():
        try:
            target.rmdir()
        except OSError as exc:
            raise ApiError(status_code=409, error="folder_not_empty", detail=f"{path!r} is not empty.") from exc
        return FileChange(relative(ref.root, target), 0, 0)
    raise ApiError(status_code=404, error="file_not_found", detail=f"There is no file {path!r}.", path=path)


def iter_file(target: Path) -> Iterator[bytes]:
    with target.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


def _fsync_dir(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)

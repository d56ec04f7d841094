"""Batch file operations (folder copy, search-and-replace, staged inputs) under one write check.

Every operation is planned against the workspace as it is now and staged into temp files; the
whole batch passes `check_write` once (spec "Limits" 9: the batch uses the same limit as the
single-file path) and only then are the temp files renamed into place.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collab.errors import DomainError, Invalid, NotFound
from workspace.sandboxes.filestore import (
    DiskFull,
    FileChange,
    StagedFile,
    WorkspaceRef,
    WriteIntent,
    check_write,
    iter_file,
    not_regular,
    open_read,
    refuse_full,
    regular_files,
    relative,
    resolve,
    stage,
    workspace_write_lock,
)

MAX_OPERATIONS = 100
MAX_FILES = 2000
MAX_REPLACE_FILE_BYTES = 8 * 1024 * 1024
# fnmatch turns a glob into a pattern by scanning ahead from every `[` for its `]`: quadratic in the
# glob's length (10^5 `[` held a thread for minutes). 256 characters cost it about 2 ms.
MAX_GLOB_CHARS = 256


@dataclass(frozen=True)
class BatchReport:
    changes: tuple[FileChange, ...]

    @property
    def delta(self) -> int:
        return sum(change.new_size - change.old_size for change in self.changes)


def _bad(detail: str) -> Invalid:
    return Invalid(error="invalid_batch", detail=detail)


def _plan_copy(root: Path, operation: dict[str, Any]) -> list[tuple[str, Any]]:
    source_name, target_name = operation.get("from"), operation.get("to")
    if not isinstance(source_name, str) or not isinstance(target_name, str):
        raise _bad("copy needs 'from' and 'to' paths.")
    source = resolve(root, source_name)
    target = resolve(root, target_name)
    try:
        mode = source.stat().st_mode
    except OSError:
        nothing = f"There is nothing at {source_name!r}."
        raise NotFound(error="file_not_found", detail=nothing) from None
    if stat.S_ISREG(mode):
        return [(relative(root, target), source)]
    if not stat.S_ISDIR(mode):
        raise not_regular(source_name, mode)
    if target == source or source in target.parents:
        raise _bad(f"Cannot copy {source_name!r} into itself.")
    # A folder's regular files only: its symlinks, FIFOs, sockets and devices are not copied.
    return [
        (relative(root, target / path), source / path) for path, _size in regular_files(root, relative(root, source))
    ]


def _plan_replace(root: Path, operation: dict[str, Any]) -> list[tuple[str, Any]]:
    search, replacement = operation.get("search"), operation.get("replace")
    if not isinstance(search, str) or not search or not isinstance(replacement, str):
        raise _bad("replace needs a non-empty 'search' string and a 'replace' string.")
    pattern = operation.get("glob", "*")
    if not isinstance(pattern, str) or len(pattern) > MAX_GLOB_CHARS:
        raise _bad(f"'glob' must be a string of at most {MAX_GLOB_CHARS} characters.")
    planned = []
    for path, size in regular_files(root):
        if size > MAX_REPLACE_FILE_BYTES or not fnmatch.fnmatch(path, pattern):
            continue
        try:
            with open_read(root, root / path) as handle:
                data = handle.read(MAX_REPLACE_FILE_BYTES + 1)
            text = data.decode("utf-8")
        except (UnicodeDecodeError, OSError, DomainError):
            continue  # binary, unreadable or no longer a regular file: left alone
        if search in text and len(data) <= MAX_REPLACE_FILE_BYTES:
            planned.append((path, text.replace(search, replacement).encode("utf-8")))
    return planned


def _plan_stage(root: Path, operation: dict[str, Any]) -> list[tuple[str, Any]]:
    path = operation.get("path")
    if not isinstance(path, str):
        raise _bad("stage needs a 'path'.")
    resolve(root, path)
    if isinstance(operation.get("content"), str):
        return [(path, operation["content"].encode("utf-8"))]
    if isinstance(operation.get("content_base64"), str):
        try:
            return [(path, base64.b64decode(operation["content_base64"], validate=True))]
        except (binascii.Error, ValueError) as exc:
            raise _bad(f"content_base64 of {path!r} is not valid base64.") from exc
    raise _bad(f"stage of {path!r} needs 'content' (text) or 'content_base64'.")


_PLANNERS = {"copy": _plan_copy, "replace": _plan_replace, "stage": _plan_stage}


def _chunks(root: Path, source: Any):
    return iter_file(root, source) if isinstance(source, Path) else [source]


def run_batch(ref: WorkspaceRef, operations: list[dict[str, Any]]) -> BatchReport:
    if not operations or len(operations) > MAX_OPERATIONS:
        raise _bad(f"A batch holds 1 to {MAX_OPERATIONS} operations.")
    root = ref.root
    root.mkdir(parents=True, exist_ok=True)
    planned: dict[str, Any] = {}
    for index, operation in enumerate(operations):
        planner = _PLANNERS.get(operation.get("op")) if isinstance(operation, dict) else None
        if planner is None:
            raise _bad(f"Operation {index}: 'op' must be one of {sorted(_PLANNERS)}.")
        for path, source in planner(root, operation):
            if path in planned:
                raise _bad(f"Operation {index}: {path!r} is written twice in one batch.")
            planned[path] = source
    if len(planned) > MAX_FILES:
        raise _bad(f"A batch may write at most {MAX_FILES} files.")
    with workspace_write_lock(ref.workspace_id):
        return _stage_check_commit(ref, root, planned)


def _stage_check_commit(ref: WorkspaceRef, root: Path, planned: dict[str, Any]) -> BatchReport:
    staged: list[StagedFile] = []
    try:
        for path, source in planned.items():
            try:
                staged.append(stage(root, path, _chunks(root, source)))
            except DiskFull as full:
                raise refuse_full(ref, (*(s.change for s in staged), full.change)) from full
        check_write(WriteIntent(ref, tuple(s.change for s in staged)))
        for item in staged:
            item.commit()
    except BaseException:
        for item in staged:
            item.discard()
        raise
    return BatchReport(changes=tuple(s.change for s in staged))

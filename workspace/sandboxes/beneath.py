"""Opening paths inside a workspace without ever leaving it, even while sandbox code races us.

The file API runs as the server (root on a sandbox host) over directories that sandbox code can
change at any moment: a folder checked a moment ago may be a symlink to /etc by the time it is
opened. So every file API operation goes through a directory descriptor of the workspace and
`openat2(RESOLVE_BENEATH)`: the kernel resolves the path and refuses any step that would leave the
workspace, with no window between the check and the use. Symlinks that stay inside still work.
Kernels without openat2 (before 5.6) get a component-by-component walk that refuses symlinks.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
from collections.abc import Callable
from pathlib import Path

_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}.get(platform.machine())
_RESOLVE_NO_XDEV = 0x01
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_libc = ctypes.CDLL(None, use_errno=True)
_has_openat2: bool | None = None


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class Escape(OSError):
    """The path leaves the workspace (through a symlink, `..` or another mount)."""


def open_beneath(root: Path, relative: str, flags: int, mode: int = 0o600) -> int:
    """A descriptor for `relative` inside `root`; raises Escape if resolving it would leave `root`."""
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return open_at(root_fd, relative, flags, mode)
    finally:
        os.close(root_fd)


def open_parent(root: Path, relative: str, *, on_created: Callable[[int], None] | None = None) -> tuple[int, str]:
    """The directory holding `relative` (opened for reading, caller closes it) and the final name.

    With `on_created`, missing folders on the way are made, one `mkdirat` at a time inside the
    folder just opened, and each new one is handed to `on_created`; without it they must exist.
    """
    *folders, name = [part for part in relative.split("/") if part not in ("", ".")]
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    current = root_fd
    try:
        for folder in folders:
            try:
                following = open_at(current, folder, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                if on_created is None:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(folder, 0o700, dir_fd=current)
                following = open_at(current, folder, os.O_RDONLY | os.O_DIRECTORY)
                on_created(following)
            if current != root_fd:
                os.close(current)
            current = following
        if current == root_fd:
            current = os.dup(root_fd)
        return current, name
    except BaseException:
        if current != root_fd:
            os.close(current)
        raise
    finally:
        os.close(root_fd)


def open_at(directory_fd: int, relative: str, flags: int, mode: int = 0o600, *, follow_symlinks: bool = True) -> int:
    """`relative` below the open folder `directory_fd`, never leaving it (Escape otherwise).

    Symlinks that stay inside are followed unless `follow_symlinks` is off, as a walk needs (it
    must not reach one folder twice): then any symlink on the way is an Escape.
    """
    global _has_openat2
    if _has_openat2 is not False and _SYS_OPENAT2 is not None:
        resolve = _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS | _RESOLVE_NO_XDEV
        how = _OpenHow(
            flags | os.O_CLOEXEC,
            mode if flags & os.O_CREAT else 0,
            resolve if follow_symlinks else resolve | _RESOLVE_NO_SYMLINKS,
        )
        descriptor = _libc.syscall(_SYS_OPENAT2, directory_fd, relative.encode(), ctypes.byref(how), ctypes.sizeof(how))
        if descriptor >= 0:
            _has_openat2 = True
            return descriptor
        code = ctypes.get_errno()
        if code != errno.ENOSYS:
            if code in (errno.EXDEV, errno.ELOOP):
                raise Escape(code, "the path leaves the workspace", relative)
            raise OSError(code, os.strerror(code), relative)
        _has_openat2 = False
    return _walk_without_symlinks(directory_fd, relative, flags, mode)


def _walk_without_symlinks(directory_fd: int, relative: str, flags: int, mode: int) -> int:
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if any(part == ".." for part in parts):
        raise Escape(errno.EXDEV, "the path leaves the workspace", relative)
    if not parts:
        return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=directory_fd)
    current = directory_fd
    try:
        for part in parts[:-1]:
            if os.path.islink(os.path.join(f"/proc/self/fd/{current}", part)):
                raise Escape(errno.ELOOP, "the path goes through a symlink", relative)
            following = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            if current != directory_fd:
                os.close(current)
            current = following
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=current)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Escape(errno.ELOOP, "the path goes through a symlink", relative) from exc
            raise
    finally:
        if current != directory_fd:
            os.close(current)

"""Workspace volumes: the kernel's bound on a workspace's disk use.

Where the service may mount (root), each workspace lives on an ext4 image of its own, so sandbox
code that writes past what it may gets ENOSPC from the kernel. What it may write is the smaller of
two rooms: its app's disk limit, and what its payer's per-user total has left. The file API
writes through the same mount and still answers its exact 507 first. Where the service may not
mount, workspaces are plain directories measured after each exec.

An image (`<workspaces>/.images/<workspace id>.img`, sparse: it takes the disk its files take, and
`discard` gives back what is deleted) is mounted at `<workspaces>/.images/<workspace id>.volume`, a
root-only place, and holds:
- `workspace/`: bind-mounted at the workspace's directory, all sandbox code and the file API see;
- `ballast`: a root-owned file, allocated but never written, sized so that the free space sandbox
  code sees is its payer's remaining per-user total (`ballast_set`); deleting files frees room
  again, and the next exec or sweep sizes it anew;
- `layout`: the marker of this layout (images made before it held the workspace at their root).
Images are twice the app's limit with half reserved for root (ext4's reserved blocks): sandbox code
(never root) is held to the limit, and the file API (root) keeps room for the temp copy a
shrinking or same-size overwrite stages, however full the workspace or the payer's total is
(spec "Errors" 2). Images survive restarts; a process that finds one unmounted mounts it again.

A workspace is its owner's alone on the host (0700, owned by the sandbox uid where there is one),
inside a workspaces folder others may pass through but not list (0711); images are 0600 and their
volumes sit in a root-only folder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import logging
import os
import secrets
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from workspace.sandboxes.reach import passable_dirs

logger = logging.getLogger(__name__)

IMAGE = "image"
MEASURE = "measure"
# Below this an ext4 journal would take a large share of the image; small images go without.
_JOURNAL_FROM_BYTES = 64 * 1024 * 1024
# ext4 cannot be made smaller than this; tinier limits still get this image (the file API's
# exact check holds the limit itself, the kernel holds the image size).
_SMALLEST_IMAGE_BYTES = 1024 * 1024
# The share of an image only root may fill: its limit, when the image is twice the limit.
_ROOT_RESERVED_PERCENT = "50"
# `discard` returns deleted blocks to the host (holes punched in the sparse image).
_MOUNT_OPTIONS = "loop,nosuid,nodev,discard"
_INNER = "workspace"
_BALLAST = "ballast"
_MARKER = "layout"
_TOOLS = ("mkfs.ext4", "mount", "umount", "resize2fs", "e2fsck", "losetup", "findmnt", "tune2fs")
# bubblewrap runs as the sandbox uid and reaches a workspace by its path through this folder.
_WORKSPACES_MODE = 0o711
_WORKSPACE_MODE = 0o700
# Workspaces this process could not give an image (their files did not fit): not retried.
_unbounded: set[str] = set()
# Mounted images the kernel would not grow online: retried at their next mount, not on every call.
_not_growable: set[str] = set()


class VolumeError(Exception):
    """An image could not be made or mounted; the caller falls back to measuring."""


def workspaces_root() -> Path:
    return Path(settings.WORKSPACE_VAR_DIR) / "workspaces"


@functools.cache
def _may_mount() -> bool:
    return os.geteuid() == 0 and all(shutil.which(tool) for tool in _TOOLS)


def disk_enforcement() -> str:
    """IMAGE or MEASURE, from `WORKSPACE_DISK_ENFORCEMENT` and what this process may do."""
    wanted = settings.WORKSPACE_DISK_ENFORCEMENT
    if wanted not in ("auto", IMAGE, MEASURE):
        raise ImproperlyConfigured(f"WORKSPACE_DISK_ENFORCEMENT must be auto, image or measure, not {wanted!r}.")
    able = _may_mount()
    if wanted == IMAGE and not able:
        raise ImproperlyConfigured(
            "WORKSPACE_DISK_ENFORCEMENT=image needs root and e2fsprogs/util-linux (mkfs.ext4, mount, losetup)."
        )
    if wanted == "auto":
        return IMAGE if able else MEASURE
    return wanted


def enforcement_warnings() -> list[str]:
    if disk_enforcement() == MEASURE:
        return [
            "Workspaces are plain directories: a command can write past its app's disk limit or its owner's "
            "per-user total until the measurement after its exec stops the sandbox (mount images need root)."
        ]
    return []


def workspace_prepare(directory: Path, *, limit_bytes: int | None, uid: int | None) -> Path:
    """`directory`, mounted from its image when disk is bounded by images, owned by `uid`.

    Cheap when already prepared (a mount check and a stat), so every file operation and every
    sandbox open may call it. A workspace whose image could not be made stays a plain directory
    (measured after each exec) and is not retried by this process.
    """
    passable_dirs(directory.parent)
    if not limit_bytes or disk_enforcement() != IMAGE or str(directory) in _unbounded:
        directory.mkdir(parents=True, exist_ok=True)
        _adopt(directory, uid)
        return directory
    if os.path.ismount(directory):
        _grow_if_raised(directory, image_path(directory), limit_bytes)
        _adopt(directory, uid)
        return directory
    with _volume_lock(directory):
        if not os.path.ismount(directory):
            try:
                _mount_image(directory, limit_bytes, uid)
            except VolumeError as exc:
                logger.warning("workspace %s stays a plain directory (measured after each exec): %s", directory, exc)
                _unbounded.add(str(directory))
                directory.mkdir(parents=True, exist_ok=True)
                _adopt(directory, uid)
    return directory


def is_bounded(directory: Path) -> bool:
    """True when the kernel bounds this workspace (it is mounted from an image)."""
    return os.path.ismount(directory)


def workspace_remove(directory: Path) -> None:
    """A workspace no longer wanted: unmounted, then the directory and the image removed.
    Removing what is already gone is not an error."""
    volume = _volume_path(directory)
    with _volume_lock(directory):
        for point in (directory, volume):
            if os.path.ismount(point):
                _run(["umount", "-l", str(point)])
        # Not shutil.rmtree: it recurses, and sandbox code may nest folders thousands deep.
        # rm walks any depth, never follows a symlink and stays on this filesystem.
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(directory)], check=False, capture_output=True)
        with contextlib.suppress(OSError):
            volume.rmdir()
        image = image_path(directory)
        image.unlink(missing_ok=True)
        image.with_suffix(".lock").unlink(missing_ok=True)


def used_bytes(directory: Path) -> int:
    """What a mounted image's workspace holds, from the filesystem's own count (no walk): the
    blocks its files take plus a little metadata, without the ballast."""
    stats = os.statvfs(directory)
    return max(0, (stats.f_blocks - stats.f_bfree) * stats.f_frsize - _ballast_bytes(directory))


def ballast_set(directory: Path, room: int | None) -> None:
    """Sizes the image's ballast so that sandbox code may grow the workspace by at most `room`
    bytes (None: no per-user total binds it, so no ballast).

    A workspace that is no image, or one being mounted right now, is left alone: the next exec
    or sweep sizes it. Where sandbox code filled the room meanwhile, the ballast takes what is
    left, so growth stops anyway.
    """
    ballast = _ballast_path(directory)
    if not is_bounded(directory) or (room is None and not os.path.lexists(ballast)):
        return
    with _volume_lock(directory, wait=False) as locked:
        if not locked or not os.path.ismount(ballast.parent):
            return
        if room is None:
            ballast.unlink(missing_ok=True)
            return
        stats = os.statvfs(directory)
        held = _ballast_bytes(directory)
        # In whole blocks, rounded so that sandbox code never gets more than `room`.
        target = max(0, held + (stats.f_bavail - room // stats.f_frsize) * stats.f_frsize)
        if target != held:
            _ballast_resize(ballast, target)


def _ballast_resize(ballast: Path, target: int) -> None:
    descriptor = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        if target < os.fstat(descriptor).st_size:
            os.ftruncate(descriptor, target)
            return
        try:
            os.posix_fallocate(descriptor, 0, target)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            # Sandbox code took some of the room meanwhile: hold what is still free.
            stats = os.fstatvfs(descriptor)
            free = stats.f_bavail * stats.f_frsize
            if free:
                os.posix_fallocate(descriptor, 0, os.fstat(descriptor).st_blocks * 512 + free)
    finally:
        os.close(descriptor)


def unmount_under(directory: Path) -> int:
    """Unmounts every workspace image mounted below `directory` (its volume and the bind at the
    workspace), deepest first; returns how many images.

    For tests, benchmarks and `manage.py release_sandboxes`: in service, images stay mounted.
    """
    prefix = str(directory.resolve()) + "/"
    with open("/proc/self/mounts") as mounts:
        points = [fields[1] for fields in map(str.split, mounts) if fields[1].startswith(prefix)]
    # A workspace's bind (`workspaces/3`) sorts after its volume (`workspaces/.images/3.volume`).
    for point in sorted(points, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)
    return sum(point.endswith(".volume") for point in points)


def image_path(directory: Path) -> Path:
    """The file on the host that holds the workspace `directory`'s image (mounted or not)."""
    return directory.parent / ".images" / f"{directory.name}.img"


def _volume_path(directory: Path) -> Path:
    return directory.parent / ".images" / f"{directory.name}.volume"


def _ballast_path(directory: Path) -> Path:
    return _volume_path(directory) / _BALLAST


def _ballast_bytes(directory: Path) -> int:
    try:
        return os.stat(_ballast_path(directory), follow_symlinks=False).st_blocks * 512
    except OSError:
        return 0


def _image_bytes(limit_bytes: int) -> int:
    return 2 * max(_SMALLEST_IMAGE_BYTES, limit_bytes)


@contextlib.contextmanager
def _volume_lock(directory: Path, *, wait: bool = True) -> Iterator[bool]:
    """Serialises mounting and sizing one workspace across processes (web workers, the worker,
    a host); yields False when `wait` is off and another process holds it."""
    image = image_path(directory)
    image.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _keep_mode(image.parent, 0o700)
    with open(image.with_suffix(".lock"), "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True


def _mount_image(directory: Path, limit_bytes: int, uid: int | None) -> None:
    image, volume = image_path(directory), _volume_path(directory)
    created = False
    if not os.path.ismount(volume):
        wanted = _image_bytes(limit_bytes)
        created = not image.exists()
        if created:
            _make_image(image, wanted)
        else:
            _keep_mode(image, 0o600)
            _await_released(image)
            if image.stat().st_size != wanted:
                _resize_offline(image, wanted)
            # Images made before the root reserve get it now (and any resize kept the old share).
            _run(["tune2fs", "-m", _ROOT_RESERVED_PERCENT, str(image)])
        volume.mkdir(mode=0o700, exist_ok=True)
        _run(["mount", "-o", _MOUNT_OPTIONS, str(image), str(volume)])
    try:
        inner = _lay_out(volume, created=created)
        directory.mkdir(parents=True, exist_ok=True)
        if any(directory.iterdir()):
            _move_into(inner, directory)
    except (VolumeError, OSError) as exc:
        _run(["umount", str(volume)], ok_codes=(0, 32))
        if created:
            image.unlink(missing_ok=True)
        raise VolumeError(str(exc)) from exc
    _run(["mount", "--bind", "-o", "nosuid,nodev", str(inner), str(directory)])
    _adopt(directory, uid)


def _lay_out(volume: Path, *, created: bool) -> Path:
    """The mounted image's workspace folder; an image of the earlier layout (its files at the
    root) has them moved into it first, by renames inside the one filesystem."""
    inner, marker = volume / _INNER, volume / _MARKER
    if not _is_marker(marker):
        if created:
            with contextlib.suppress(OSError):
                (volume / "lost+found").rmdir()
        staging = volume / f".layout-{secrets.token_hex(4)}"
        staging.mkdir(mode=_WORKSPACE_MODE)
        for entry in volume.iterdir():
            if entry != staging:
                entry.rename(staging / entry.name)
        staging.rename(inner)
        marker.write_text("workspace/ and ballast\n")
        marker.chmod(0o600)
    # Sandbox code owned the root of an image of the earlier layout; now nobody but root enters it.
    os.chown(volume, 0, 0)
    volume.chmod(0o700)
    return inner


def _is_marker(marker: Path) -> bool:
    """A root-owned marker file: sandbox code of the earlier layout could have made the name, not
    as root."""
    try:
        info = os.stat(marker, follow_symlinks=False)
    except OSError:
        return False
    return info.st_uid == 0 and marker.is_file() and not marker.is_symlink()


def _make_image(image: Path, size: int) -> None:
    features = [] if size >= _JOURNAL_FROM_BYTES else ["-O", "^has_journal"]
    try:
        with open(os.open(image, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600), "wb") as handle:
            handle.truncate(size)
        ownership = ["-E", "root_owner=0:0"]
        _run(["mkfs.ext4", "-q", "-F", "-m", _ROOT_RESERVED_PERCENT, *features, *ownership, str(image)])
    except (OSError, VolumeError) as exc:
        image.unlink(missing_ok=True)
        raise VolumeError(f"could not make {image}: {exc}") from exc


def _await_released(image: Path, *, seconds: float = 5.0) -> None:
    """Waits (bounded) until no loop device holds `image`: after a lazy unmount (`umount -l`,
    `release_sandboxes`) the kernel may still be writing the filesystem back, and checking,
    resizing or mounting it again meanwhile reads half-written metadata ("checksum does not
    match")."""
    deadline = time.monotonic() + seconds
    while _run(["losetup", "-j", str(image)], ok_codes=(0, 1)).strip() and time.monotonic() < deadline:
        time.sleep(0.02)


def _resize_offline(image: Path, size: int) -> None:
    """A changed limit: grow or shrink the unmounted image; a shrink that cannot fit keeps the old size."""
    current = image.stat().st_size
    try:
        _run(["e2fsck", "-f", "-p", str(image)], ok_codes=(0, 1))
        if size > current:
            with open(image, "r+b") as handle:
                handle.truncate(size)
        _run(["resize2fs", str(image), f"{size // 1024}K"])
        if size < current:
            with open(image, "r+b") as handle:
                handle.truncate(size)
    except VolumeError as exc:
        logger.warning("could not resize %s to %d bytes, it keeps %d: %s", image, size, current, exc)


def _grow_if_raised(directory: Path, image: Path, limit_bytes: int) -> None:
    """A raised limit grows a mounted image at once where the kernel allows it (online resize needs
    CAP_SYS_RESOURCE); otherwise, like a lowered one, it takes effect at the next mount."""
    wanted = _image_bytes(limit_bytes)
    try:
        if image.stat().st_size >= wanted:
            return
    except FileNotFoundError:
        return
    if str(image) in _not_growable:
        return
    device = _run(["findmnt", "-n", "-o", "SOURCE", str(_volume_path(directory))]).strip()
    current = image.stat().st_size
    try:
        with open(image, "r+b") as handle:
            handle.truncate(wanted)
        _run(["losetup", "-c", device])
        _run(["resize2fs", device])
        _run(["tune2fs", "-m", _ROOT_RESERVED_PERCENT, device])
    except VolumeError as exc:
        # The filesystem still ends where it did: so must the image, or the next mount would
        # see the new size and skip the offline resize.
        with open(image, "r+b") as handle:
            handle.truncate(current)
        with contextlib.suppress(VolumeError):
            _run(["losetup", "-c", device])
        _not_growable.add(str(image))
        logger.warning("%s keeps its size until it is next mounted: %s", image, exc)


def _move_into(inner: Path, directory: Path) -> None:
    """A workspace that held files before it had an image: copy them in, or refuse if they do not fit."""
    try:
        for entry in directory.iterdir():
            target = inner / entry.name
            if entry.is_dir() and not entry.is_symlink():
                shutil.copytree(entry, target, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(entry, target, follow_symlinks=False)
    except OSError as exc:
        raise VolumeError(f"the files already there do not fit the image: {exc}") from exc
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _adopt(directory: Path, uid: int | None) -> None:
    """The workspace root belongs to the sandbox's uid (so sandbox code may write there) and to
    nobody else; its folder lets others through to it but not list it. Modes that sandbox code
    changed are put back here, on every file operation and sandbox open."""
    _keep_mode(directory.parent, _WORKSPACES_MODE)
    info = directory.stat()
    if uid is not None and info.st_uid != uid:
        os.chown(directory, uid, uid)
    if stat.S_IMODE(info.st_mode) != _WORKSPACE_MODE:
        os.chmod(directory, _WORKSPACE_MODE)


def _keep_mode(path: Path, mode: int) -> None:
    """`path` at `mode`, when this process may change it (it owns it, or it is root)."""
    info = path.stat()
    if stat.S_IMODE(info.st_mode) != mode and (os.geteuid() in (0, info.st_uid)):
        os.chmod(path, mode)


def _run(argv: list[str], *, ok_codes: tuple[int, ...] = (0,)) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise VolumeError(f"{argv[0]} failed: {exc}") from exc
    if done.returncode not in ok_codes:
        raise VolumeError(f"{' '.join(argv[:2])} exited {done.returncode}: {done.stderr.strip()[:300]}")
    return done.stdout

"""How a local sandbox's limits are enforced: cgroup v2, cgroup v1, or prlimit as a last resort.

Each driver turns a sandbox id and its spec into limit files (or a prlimit prefix) and wraps a
command so the process joins them before it runs the user's program. Joining happens in a tiny
shell prologue (`echo $$ > cgroup.procs; exec ...`), not in `preexec_fn`, which is unsafe in a
threaded server.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from quotas.sizes import SizeError, parse_optional_size, size_string
from quotas.values import SandboxSize

logger = logging.getLogger(__name__)

CPU_PERIOD_US = 100_000
GROUP_NAME = "workspace-sandboxes"
# Prologue: the first argument is how many procs files follow; the process joins each, then execs.
_JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'


@dataclass(frozen=True)
class Confinement:
    """What a driver set up for one sandbox; stored with the sandbox's state."""

    driver: str
    groups: list[str] = field(default_factory=list)  # cgroup directories, one per hierarchy
    kernel: bool = False  # True when the directories are real cgroups (not a test's temp dir)
    prefix: list[str] = field(default_factory=list)  # command prefix (prlimit)

    def as_dict(self) -> dict:
        return {"driver": self.driver, "groups": self.groups, "kernel": self.kernel, "prefix": self.prefix}

    @classmethod
    def from_dict(cls, raw: dict) -> Confinement:
        return cls(raw["driver"], list(raw["groups"]), bool(raw["kernel"]), list(raw["prefix"]))

    def wrap(self, argv: list[str]) -> list[str]:
        if not self.groups:
            return [*self.prefix, *argv]
        procs = [str(Path(group) / "cgroup.procs") for group in self.groups]
        return ["/bin/sh", "-c", _JOIN, "sandbox", str(len(procs)), *procs, *self.prefix, *argv]

    def member_pids(self) -> list[int]:
        pids: list[int] = []
        for group in self.groups:
            try:
                text = (Path(group) / "cgroup.procs").read_text()
            except OSError:
                continue
            pids.extend(int(line) for line in text.split() if line.isdigit())
        return pids


class IsolationDriver(Protocol):
    name: str
    unenforced: tuple[str, ...]

    def create(self, sandbox_id: str, spec: SandboxSize) -> Confinement: ...

    def kill(self, confinement: Confinement) -> None:
        """Kills every process in the sandbox's groups (the kernel's list, not ours)."""
        ...

    def destroy(self, confinement: Confinement) -> None: ...

    def oom_kills(self, confinement: Confinement) -> int | None:
        """How many processes the kernel has killed in the sandbox for want of memory so far (a
        counter: compare it before and after a command); None where the host cannot tell."""
        ...


def _counter(path: Path, name: str) -> int | None:
    """The `name N` line of a cgroup's flat-keyed file (memory.events, memory.oom_control)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return None


def _write(path: Path, value: str) -> None:
    path.write_text(f"{value}\n")


def _remove_group(directory: Path, *, kernel: bool) -> None:
    if not directory.exists():
        return
    if kernel:
        # A real cgroup holds only kernel files and goes away with rmdir once its tasks are gone.
        try:
            directory.rmdir()
        except OSError as exc:
            logger.warning("could not remove cgroup %s: %s", directory, exc)
        return
    shutil.rmtree(directory, ignore_errors=True)


def _make_group(directory: Path) -> bool:
    """Creates the group; True when the kernel populated it (a real cgroup, not a plain directory)."""
    directory.mkdir(parents=False, exist_ok=True)
    return (directory / "cgroup.procs").exists()


class CgroupV2Driver:
    """`<root>/workspace-sandboxes/<id>` with memory.max, cpu.max and pids.max."""

    name = "cgroup-v2"
    unenforced: tuple[str, ...] = ()

    def __init__(self, root: Path) -> None:
        self.parent = root / GROUP_NAME

    def _prepare_parent(self) -> None:
        if self.parent.exists():
            return
        self.parent.mkdir(parents=True, exist_ok=True)
        # Delegate the controllers to the children; a plain directory in tests just records it.
        for level in (self.parent.parent, self.parent):
            try:
                _write(level / "cgroup.subtree_control", "+memory +cpu +pids")
            except OSError as exc:
                logger.warning("could not enable controllers in %s: %s", level, exc)

    def create(self, sandbox_id: str, spec: SandboxSize) -> Confinement:
        self._prepare_parent()
        group = self.parent / sandbox_id
        kernel = _make_group(group)
        if spec.memory_bytes is not None:
            _write(group / "memory.max", str(spec.memory_bytes) if spec.memory_bytes else "max")
        if spec.cpu_cores is not None:
            quota = str(round(spec.cpu_cores * CPU_PERIOD_US)) if spec.cpu_cores else "max"
            _write(group / "cpu.max", f"{quota} {CPU_PERIOD_US}")
        if spec.pids_max is not None:
            _write(group / "pids.max", str(spec.pids_max) if spec.pids_max else "max")
        return Confinement(self.name, [str(group)], kernel)

    def kill(self, confinement: Confinement) -> None:
        """`cgroup.kill` ends every process of the group at once, including ones that hid from us."""
        for group in map(Path, confinement.groups):
            kill_file = group / "cgroup.kill"
            if confinement.kernel and kill_file.exists():
                with contextlib.suppress(OSError):
                    _write(kill_file, "1")

    def destroy(self, confinement: Confinement) -> None:
        self.kill(confinement)
        for group in map(Path, confinement.groups):
            _remove_group(group, kernel=confinement.kernel)

    def oom_kills(self, confinement: Confinement) -> int | None:
        # memory.events counts the kills of the group and its descendants (bubblewrap's init is one).
        return _counter(Path(confinement.groups[0]) / "memory.events", "oom_kill") if confinement.groups else None


class CgroupV1Driver:
    """One group per controller hierarchy: `<root>/{memory,cpu,pids}/workspace-sandboxes/<id>`."""

    name = "cgroup-v1"
    # The freezer sets no limit: close freezes the group so nothing can fork while it is killed.
    CONTROLLERS = ("memory", "cpu", "pids", "freezer")

    def __init__(self, root: Path) -> None:
        self.root = root
        self.available = tuple(c for c in self.CONTROLLERS if (root / c).is_dir() and os.access(root / c, os.W_OK))
        self.unenforced = tuple(c for c in self.CONTROLLERS if c not in self.available and c != "freezer")

    def create(self, sandbox_id: str, spec: SandboxSize) -> Confinement:
        groups: list[Path] = []
        kernel = False
        for controller in self.available:
            parent = self.root / controller / GROUP_NAME
            parent.mkdir(exist_ok=True)
            group = parent / sandbox_id
            kernel = _make_group(group) or kernel
            groups.append(group)
            self._limit(controller, group, spec)
        return Confinement(self.name, [str(group) for group in groups], kernel)

    @staticmethod
    def _limit(controller: str, group: Path, spec: SandboxSize) -> None:
        if controller == "memory" and spec.memory_bytes is not None:
            _write(group / "memory.limit_in_bytes", str(spec.memory_bytes) if spec.memory_bytes else "-1")
        elif controller == "cpu" and spec.cpu_cores is not None:
            _write(group / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            quota = round(spec.cpu_cores * CPU_PERIOD_US) if spec.cpu_cores else -1
            _write(group / "cpu.cfs_quota_us", str(quota))
        elif controller == "pids" and spec.pids_max is not None:
            _write(group / "pids.max", str(spec.pids_max) if spec.pids_max else "max")

    def kill(self, confinement: Confinement) -> None:
        """Freeze, kill every member, thaw: a frozen group cannot fork a survivor mid-kill."""
        if not confinement.kernel:
            return
        freezer = next((Path(g) for g in confinement.groups if Path(g).parent.parent.name == "freezer"), None)
        with contextlib.suppress(OSError):
            if freezer is not None:
                _write(freezer / "freezer.state", "FROZEN")
            for pid in confinement.member_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if freezer is not None:
                _write(freezer / "freezer.state", "THAWED")

    def destroy(self, confinement: Confinement) -> None:
        for group in map(Path, confinement.groups):
            _remove_group(group, kernel=confinement.kernel)

    def oom_kills(self, confinement: Confinement) -> int | None:
        # memory.oom_control has carried an `oom_kill` counter since Linux 4.13.
        memory = next((Path(g) for g in confinement.groups if Path(g).parent.parent.name == "memory"), None)
        return None if memory is None else _counter(memory / "memory.oom_control", "oom_kill")


class PrlimitDriver:
    """No writable cgroup: per-process limits through util-linux `prlimit`.

    `--as` bounds each process's address space (not the sandbox's total), and neither cpu
    cores nor a process count can be enforced this way for root; the start-up warning says so.
    """

    name = "prlimit"
    unenforced = ("cpu", "pids", "memory (per process only)")

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or shutil.which("prlimit") or ""

    def create(self, sandbox_id: str, spec: SandboxSize) -> Confinement:
        prefix: list[str] = []
        if self.binary:
            if spec.memory_bytes:
                prefix.append(f"--as={spec.memory_bytes}")
            if spec.pids_max:
                prefix.append(f"--nproc={spec.pids_max}")
            prefix = [self.binary, *prefix, "--"] if prefix else []
        return Confinement(self.name, [], False, prefix)

    def kill(self, confinement: Confinement) -> None:
        return None

    def destroy(self, confinement: Confinement) -> None:
        return None

    def oom_kills(self, confinement: Confinement) -> int | None:
        # A process over `--as` sees its allocation fail; nobody is killed, so nothing to count.
        return None


def detect_driver(root: Path, preference: str = "auto") -> IsolationDriver:
    """The strongest driver this host allows, or the one the settings force."""
    if preference == "v2":
        return CgroupV2Driver(root)
    if preference == "v1":
        return CgroupV1Driver(root)
    if preference == "prlimit":
        return PrlimitDriver()
    controllers = root / "cgroup.controllers"
    if controllers.exists() and "memory" in controllers.read_text() and os.access(root, os.W_OK):
        return CgroupV2Driver(root)
    v1 = CgroupV1Driver(root)
    if v1.available:
        return v1
    return PrlimitDriver()


def configured_driver() -> IsolationDriver:
    root = Path(settings.WORKSPACE_CGROUP_ROOT)
    return detect_driver(root, settings.WORKSPACE_CGROUP_DRIVER)


def warn_about_enforcement(driver: IsolationDriver) -> None:
    """The start-up warning: name what this host cannot enforce, so nobody relies on it."""
    if driver.unenforced:
        logger.warning(
            "Local sandboxes use the %s driver; these limits are not enforced on this host: %s.",
            driver.name,
            ", ".join(driver.unenforced),
        )


# (dimension, SandboxSize attribute, setting) of the deployment-wide kernel cap.
_CAP_SETTINGS = (
    ("cpu", "cpu_cores", "WORKSPACE_SANDBOX_CAP_CPU"),
    ("memory", "memory_bytes", "WORKSPACE_SANDBOX_CAP_MEMORY"),
    ("pids", "pids_max", "WORKSPACE_SANDBOX_CAP_PIDS"),
)


def configured_cap() -> SandboxSize:
    """The kernel ceiling of sandboxes that resolve to no limit; None where a setting is empty."""
    values: dict[str, float | int | None] = {}
    for dimension, attribute, name in _CAP_SETTINGS:
        raw = str(getattr(settings, name)).strip()
        try:
            if dimension == "memory":
                value: float | int | None = parse_optional_size(raw)
            else:
                value = (float(raw) if dimension == "cpu" else int(raw)) if raw else None
        except (SizeError, ValueError) as exc:
            raise ImproperlyConfigured(f"{name} must be empty or a positive {dimension} value, not {raw!r}.") from exc
        if value is not None and not value > 0:
            raise ImproperlyConfigured(f"{name} must be empty (no cap) or above 0, not {raw!r}.")
        values[attribute] = value
    return SandboxSize(**values)


def _shown(dimension: str, value: float | int) -> str:
    if dimension == "memory":
        return size_string(int(value))
    return f"{value:g} cores" if dimension == "cpu" else f"{int(value)} processes"


def cap_warnings(
    sizes: Mapping[str, SandboxSize], cap: SandboxSize, *, label: str = "Apps without a {dimension} size ({names})"
) -> list[str]:
    """Start-up names each app that resolves to no limit in a dimension: under the cap it still has
    a kernel ceiling, but counts nothing against per-user totals; without one it has none."""
    warnings = []
    for dimension, attribute, name in _CAP_SETTINGS:
        loose = sorted(slug for slug, size in sizes.items() if not getattr(size, attribute))
        if not loose:
            continue
        ceiling = getattr(cap, attribute)
        who = label.format(dimension=dimension, names=", ".join(loose))
        if ceiling:
            uncounted = "" if dimension == "pids" else f" and count nothing against per-user {dimension}"
            warnings.append(
                f"{who} run under the deployment cap {name} = {_shown(dimension, ceiling)} per sandbox{uncounted}."
            )
        else:
            warnings.append(
                f"{who} run with NO {dimension} limit in the kernel: {name} is empty. Give them a size "
                "(the app descriptor or [resources.per_app.default]), or set the cap."
            )
    return warnings

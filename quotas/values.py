"""The value types of the quotas: a sandbox's size, a person's limits, an override as written.

One type per concept, with no model or settings import, so every layer above may use them.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from quotas.sizes import SizeError, parse_size

if TYPE_CHECKING:
    from quotas.models import UserResourceOverride

DIMENSIONS = ("count", "cpu", "memory", "disk")
# The largest count and cpu an override takes: the count column's range, and more cores than any
# machine has. Anything above is refused by name, not left to overflow a column or a float.
MAX_COUNT = 2**31 - 1
MAX_CPU_CORES = 1_000_000
# Written in an override for "no limit"; stored as 0.
UNLIMITED_WORD = "max"


def host_name(url: str) -> str:
    """How people see a sandbox host (DESIGN.md §5 "Many sandbox machines"): its address and port
    (`sandbox-1:8100`), not its URL's scheme or path; blank for the local backend (no URL)."""
    return urllib.parse.urlsplit(url).netloc or url


@dataclass(frozen=True)
class SandboxSize:
    """Spec "Sandbox spec", the one type for a sandbox's (cpu, memory, pids): what an app resolves
    to, what a backend enforces and what the ledger charges. None = unspecified (inherited per
    dimension, or the backend decides), 0 = explicitly unlimited; the two are never merged."""

    cpu_cores: float | None = None
    memory_bytes: int | None = None
    pids_max: int | None = None

    @property
    def declares_cost(self) -> bool:
        """Per-user cpu and memory limits only apply to sizes that declare one (spec "Limits" 5)."""
        return self.cpu_cores is not None or self.memory_bytes is not None

    def inherit(self, defaults: SandboxSize) -> SandboxSize:
        """Fills only the unspecified dimensions; an explicit 0 stays unlimited (never merged)."""
        return SandboxSize(
            cpu_cores=self.cpu_cores if self.cpu_cores is not None else defaults.cpu_cores,
            memory_bytes=self.memory_bytes if self.memory_bytes is not None else defaults.memory_bytes,
            pids_max=self.pids_max if self.pids_max is not None else defaults.pids_max,
        )

    def within(self, cap: SandboxSize) -> SandboxSize:
        """What the kernel enforces: a dimension with no limit (None or 0) takes the cap's value.

        Only the kernel sees the result; the ledger charges the size itself, so an app that
        declares nothing still counts nothing against per-user totals (spec "Limits" 5).
        """

        def bound(value: Any, ceiling: Any) -> Any:
            return ceiling if not value and ceiling else value

        return SandboxSize(
            cpu_cores=bound(self.cpu_cores, cap.cpu_cores),
            memory_bytes=bound(self.memory_bytes, cap.memory_bytes),
            pids_max=bound(self.pids_max, cap.pids_max),
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class UserLimits:
    """Effective per-user limits; None means no limit in that dimension."""

    count: int | None = None
    cpu: float | None = None
    memory: int | None = None
    disk: int | None = None

    @classmethod
    def from_site(cls, *, count: int | None, cpu: float | None, memory: int | None, disk: int | None) -> UserLimits:
        """`resources.per_user` as parsed: 0, "" and absent all mean "no limit" there."""
        return cls(count=count or None, cpu=cpu or None, memory=memory or None, disk=disk or None)

    @property
    def limits_sandboxes(self) -> bool:
        return self.count is not None or self.cpu is not None or self.memory is not None


@dataclass(frozen=True)
class OverrideValues:
    """An override record's values: None = not overridden, 0 = unlimited, else the limit."""

    count: int | None = None
    cpu: float | None = None
    memory: int | None = None
    disk: int | None = None

    @classmethod
    def of(cls, row: UserResourceOverride | None) -> OverrideValues | None:
        if row is None:
            return None
        return cls(count=row.count, cpu=row.cpu, memory=row.memory, disk=row.disk)

    def as_written(self) -> dict[str, Any]:
        """The form an API client writes: unlimited as "max", so a GET body can be PUT back."""
        return {name: UNLIMITED_WORD if value == 0 else value for name, value in asdict(self).items()}

    def over(self, site: UserLimits) -> UserLimits:
        """Override first, then site default, per dimension (spec "Limits" 12)."""

        def pick(override: Any, default: Any) -> Any:
            if override is None:
                return default
            return override or None  # 0 stored = unlimited

        return UserLimits(
            count=pick(self.count, site.count),
            cpu=pick(self.cpu, site.cpu),
            memory=pick(self.memory, site.memory),
            disk=pick(self.disk, site.disk),
        )


def parse_override_value(dimension: str, raw: Any) -> int | float | None:
    """One dimension of an override as a person writes it; raises ValueError saying what was expected.

    null (and 0 for count and cpu, spec "Limits" 13) means "not overridden"; "max" means
    unlimited for every dimension; memory and disk are size strings ("512M", "2G") or bytes.
    """
    if raw is None or (isinstance(raw, str) and raw.strip() == ""):
        return None
    if isinstance(raw, str) and raw.strip().lower() == UNLIMITED_WORD:
        return 0
    if dimension in ("memory", "disk"):
        try:
            return parse_size(raw.strip() if isinstance(raw, str) else raw)
        except SizeError as exc:
            raise ValueError(f"{exc}; or 'max' for unlimited, null for the site default") from exc
    number = _number(raw, integer=dimension == "count")
    return number or None


def _number(raw: Any, *, integer: bool) -> int | float:
    kind = "a whole number" if integer else "a number of cores"
    if isinstance(raw, str):
        try:
            raw = int(raw.strip()) if integer else float(raw.strip())
        except ValueError:
            raw = None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw < 0:
        raise ValueError(f"expected {kind} >= 0, 'max' for unlimited, or null for the site default")
    if raw != raw:  # NaN is not a limit
        raise ValueError(f"expected {kind}, got {raw!r}")
    # Compared before any conversion: float() of a 400-digit integer raises OverflowError.
    ceiling = MAX_COUNT if integer else MAX_CPU_CORES
    if raw > ceiling:
        raise ValueError(f"expected {kind} up to {ceiling}, or 'max' for unlimited")
    if integer and raw != int(raw):
        raise ValueError(f"expected {kind}, got {raw!r}")
    return int(raw) if integer else float(raw)

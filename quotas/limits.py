"""Per-user limits: site defaults, override values, and the 5-second per-process memo (spec "Limits" 12)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from collab import clock
from quotas import host
from quotas.models import UserResourceOverride
from quotas.sizes import SizeError, parse_size

MEMO_TTL = timedelta(seconds=5)
DIMENSIONS = ("count", "cpu", "memory", "disk")
# Written in an override for "no limit"; stored as 0.
UNLIMITED_WORD = "max"

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TtlMemo(Generic[K, V]):
    """A per-process memo whose entries live `ttl` by `collab.clock`, so tests move time instead of sleeping.

    An entry read while the clock stands before its load time (a test clock set in the past)
    counts as stale rather than as valid for months.
    """

    def __init__(self, ttl: timedelta = MEMO_TTL, max_entries: int = 10_000) -> None:
        self._ttl = ttl
        self._max_entries = max_entries
        self._entries: dict[K, tuple[datetime, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: K, load: Callable[[], V]) -> V:
        moment = clock.now()
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and entry[0] <= moment < entry[0] + self._ttl:
            return entry[1]
        value = load()
        with self._lock:
            if len(self._entries) >= self._max_entries:
                self._entries.clear()
            self._entries[key] = (moment, value)
        return value

    def forget(self, key: K | None = None) -> None:
        with self._lock:
            if key is None:
                self._entries.clear()
            else:
                self._entries.pop(key, None)


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    if integer and raw != int(raw):
        raise ValueError(f"expected {kind}, got {raw!r}")
    if raw != raw or raw == float("inf"):  # NaN and infinity are not limits
        raise ValueError(f"expected {kind}, got {raw!r}")
    return int(raw) if integer else float(raw)


_overrides: TtlMemo[str, OverrideValues | None] = TtlMemo()


def _load_override(user_id: str) -> OverrideValues | None:
    return OverrideValues.of(UserResourceOverride.objects.filter(user_id=user_id).first())


def limits_for(user_id: str) -> UserLimits:
    """What binds `user_id` now: the override (memoised for 5 s), then the site default."""
    site = host.installed().site_limits()
    override = _overrides.get(user_id, lambda: _load_override(user_id))
    return site if override is None else override.over(site)


def limits_for_many(user_ids: Iterable[str]) -> dict[str, UserLimits]:
    """Limits of several people with one query for all their overrides (the disk sweep's path)."""
    wanted = sorted(set(user_ids))
    site = host.installed().site_limits()
    rows = {row.user_id: row for row in UserResourceOverride.objects.filter(user_id__in=wanted)}
    limits = {}
    for user_id in wanted:
        override = OverrideValues.of(rows.get(user_id))
        limits[user_id] = site if override is None else override.over(site)
    return limits


def forget_override(user_id: str) -> None:
    """The instance that wrote an override drops its memo at once (spec "Limits" 12)."""
    _overrides.forget(user_id)


_memos: list[TtlMemo] = [_overrides]


def register_memo(memo: TtlMemo) -> TtlMemo:
    """Other per-process memos of the quotas, cleared together by `forget_memos`."""
    _memos.append(memo)
    return memo


def forget_memos() -> None:
    """Clears every quota memo; run when the settings change (tests swap configs between cases)."""
    for memo in _memos:
        memo.forget()

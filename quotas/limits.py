"""Per-user limits in force: override, then site default, memoised per process for 5 s (spec "Limits" 12)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from collab import clock
from quotas import host
from quotas.models import UserResourceOverride
from quotas.values import OverrideValues, UserLimits

MEMO_TTL = timedelta(seconds=5)

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

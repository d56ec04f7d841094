"""The service's one source of "now", swappable so tests move time instead of sleeping."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.utils import timezone

_source: Callable[[], datetime] = timezone.now


def now() -> datetime:
    return _source()


def set_source(source: Callable[[], datetime]) -> None:
    global _source
    _source = source


def reset_source() -> None:
    set_source(timezone.now)


def epoch_ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)

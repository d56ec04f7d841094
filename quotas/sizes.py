"""Parsing of the size strings and durations the deployment config and app descriptors use."""

from __future__ import annotations

import re

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
# Matched in full against the stripped value: a `\s*` at each end as well as in the middle
# backtracked quadratically on "1" and a long run of spaces.
_SIZE = re.compile(r"(\d+)\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)", re.IGNORECASE)

# What "max" parses to where a field allows it: 0 is the service's "explicitly unlimited".
UNLIMITED = 0
# The largest size any column of ours holds (a signed 64-bit integer, 8 EiB): a larger one is
# refused by name rather than left to the database (SQLite raises OverflowError, a 500).
MAX_SIZE_BYTES = 2**63 - 1
_TOO_LARGE = f"a size is at most 8 EiB ({MAX_SIZE_BYTES} bytes)"


class SizeError(ValueError):
    """A size or duration that cannot be read; the message says what was expected."""


def parse_size(value: object, *, allow_max: bool = False) -> int:
    """Bytes from `"512M"`, `"1G"`, `"2048"` or an int; `"max"` -> 0 (unlimited) where allowed.

    Units are powers of 1024. Fractions and negative numbers are refused rather than rounded,
    so a typo never turns into a different limit.
    """
    if isinstance(value, bool):
        raise SizeError(f"expected a size string such as '512M', got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise SizeError(f"a size cannot be negative, got {value}")
        return _bounded(value)
    if not isinstance(value, str):
        raise SizeError(f"expected a size string such as '512M', got {value!r}")
    if value.strip().lower() == "max":
        if not allow_max:
            raise SizeError("'max' is not allowed here")
        return UNLIMITED
    match = _SIZE.fullmatch(value.strip())
    if match is None:
        raise SizeError(f"expected an integer with an optional K, M, G or T suffix, got {value!r}")
    digits = match.group(1).lstrip("0") or "0"
    # Past 19 digits no unit can bring it back under the bound, and int() of thousands of digits raises.
    if len(digits) > len(str(MAX_SIZE_BYTES)):
        raise SizeError(_TOO_LARGE)
    return _bounded(int(digits) * _UNITS[match.group(2).upper()])


def _bounded(size: int) -> int:
    if size > MAX_SIZE_BYTES:
        raise SizeError(_TOO_LARGE)
    return size


def parse_optional_size(value: object, *, allow_max: bool = False) -> int | None:
    """Like `parse_size`, but `""` means "no setting" (None), which is not the same as 0."""
    if isinstance(value, str) and value.strip() == "":
        return None
    return parse_size(value, allow_max=allow_max)


def parse_duration_seconds(value: object) -> float:
    """Seconds from `"90s"`, `"30m"`, `"2h"`, `"1d"` or a plain number of seconds (> 0)."""
    if isinstance(value, bool):
        raise SizeError(f"expected a duration such as '90s' or '30m', got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value.strip())):
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2).lower()]
    else:
        raise SizeError(f"expected a duration such as '90s' or '30m', got {value!r}")
    if seconds <= 0:
        raise SizeError(f"a duration must be positive, got {value!r}")
    return seconds


def format_size(value: int | None) -> str:
    """Human form for pages: None -> "unspecified", 0 -> "unlimited", else the largest exact-ish unit."""
    if value is None:
        return "unspecified"
    if value == 0:
        return "unlimited"
    for suffix in ("T", "G", "M", "K"):
        unit = _UNITS[suffix]
        if value >= unit:
            amount = value / unit
            return f"{amount:.0f}{suffix}" if amount == int(amount) else f"{amount:.1f}{suffix}"
    return f"{value} B"

"""How every page, admin screen and message shows an amount of bytes: one format everywhere.

Powers of 1024 with the familiar names ("512 MB", "957.3 MB", "2 GB"), one decimal only where it
is not whole. Sizes people type (config files, admin forms) keep their own syntax ("512M"):
`quotas.sizes.size_string` writes that one.
"""

from __future__ import annotations

_UNITS = (("TB", 1024**4), ("GB", 1024**3), ("MB", 1024**2), ("KB", 1024))


def format_bytes(value: int | float) -> str:
    """`0 bytes`, `1 byte`, `900 bytes`, `1.5 KB`, `512 MB`, `957.3 MB`; a value that rounds up to
    the next unit takes it (`1 GB`, never `1024 MB`)."""
    amount = int(value)
    if amount < 1024:
        return "1 byte" if amount == 1 else f"{amount} bytes"
    name, unit = next((name, unit) for name, unit in _UNITS if round(amount / unit, 1) >= 1)
    return f"{amount / unit:.1f}".removesuffix(".0") + f" {name}"

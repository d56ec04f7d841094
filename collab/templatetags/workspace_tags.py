"""Template filters shared by every page."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils.timesince import timesince

from collab import clock
from collab.edge import refusal_status
from collab.sizes import format_bytes

register = template.Library()


@register.filter
def ago(moment: datetime | None) -> str:
    """ "just now" under a minute, then Django's "3 hours ago"."""
    if moment is None:
        return ""
    if (clock.now() - moment).total_seconds() < 60:
        return "just now"
    return f"{timesince(moment, clock.now(), depth=1)} ago"


@register.filter
def human_size(value: int | float | None) -> str:
    """Bytes as every page shows them ("512 MB"); the one size filter of the templates."""
    return "" if value is None else format_bytes(value)


@register.filter
def status(refusal: object) -> int:
    """The HTTP status a refusal answers with (collab.edge maps a domain error's kind; crudgen's
    errors carry theirs), so a page can tell a quota refusal (507) from the rest."""
    return refusal_status(refusal)

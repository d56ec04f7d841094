"""Filters of the workflow pages: an interval and a run's duration as a person reads them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import template

from workspace.items import links
from workspace.items.models import Item
from workspace.workflows.rules import schedule_text

register = template.Library()


@register.filter
def schedule(every_seconds: int | None) -> str:
    return schedule_text(every_seconds)


@register.filter
def duration(length: timedelta | None) -> str:
    """0.4 s, 12 s, 2 min 5 s, 1 h 3 min; "" for none."""
    if length is None:
        return ""
    seconds = length.total_seconds()
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


@register.filter
def get_item(mapping: dict[str, Any], key: str | None) -> Any:
    """`mapping[key]`, or None: a selector's rows keyed by id, looked up in a loop."""
    return mapping.get(key) if key is not None else None


@register.filter
def item_page(item: Item) -> str:
    """Where a person sees `item`: its app's own page when it has one (an investigation's)."""
    return links.item_page(item.app_slug, item.pk)

"""Template helpers of the knowledge pages: answers with clickable `[n]` markers, readable sizes."""

from __future__ import annotations

import re
from typing import Any

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

_MARKER = re.compile(r"\[(\d{1,4})\]")


@register.filter
def cite_markers(text: str, message: Any) -> SafeString:
    """Escapes the answer, then turns each `[n]` that names one of its citations into a link that
    opens that citation; markers without a citation stay plain text."""
    known = {int(citation["marker"]) for citation in getattr(message, "citations", [])}

    def link(match: re.Match[str]) -> str:
        number = int(match.group(1))
        if number not in known:
            return match.group(0)
        return format_html(
            '<a class="kb-marker" href="#cite-{}-{}" data-marker="{}" data-testid="marker">[{}]</a>',
            message.id,
            number,
            number,
            number,
        )

    paragraphs = [_MARKER.sub(link, escape(part)) for part in re.split(r"\n\s*\n", text) if part.strip()]
    return mark_safe("".join(f"<p>{paragraph}</p>" for paragraph in paragraphs))


@register.filter
def person(user_id: str, people: dict[str, Any]) -> str:
    user = people.get(user_id)
    return user.name if user else user_id


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    return mapping.get(key, key)

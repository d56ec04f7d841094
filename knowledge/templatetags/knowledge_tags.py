"""Template helpers of the knowledge pages: messages as safe Markdown with citation previews, names."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

from knowledge.markup import CitationPreview, message_html
from knowledge.selectors import CitedSource, TranscriptEntry

register = template.Library()

PREVIEW_CHARS = 420


def citation_preview(source: CitedSource) -> CitationPreview:
    """The cited chunks as they read now, or the saved quote once a re-upload replaced them; the
    section's headings apart from the text, and the PDF page where there is one."""
    if source.chunks:
        pages = source_pages(source)
        chunks = _span("chunk", [chunk.ordinal + 1 for chunk in source.chunks])
        where = f"{pages}, {chunks}" if pages else chunks
        text = "\n\n".join(chunk.text for chunk in source.chunks)
    else:
        where, text = "as quoted", source.quote
    # The preview keeps line breaks: one line per line of the text (a list item, a line of code),
    # blank lines dropped and spaces within a line collapsed.
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return CitationPreview(
        source=f"[{source.marker}] {source.document_name}, {where}:",
        text=_shortened("\n".join(line for line in lines if line)),
        title=source.heading,
    )


@register.filter
def source_pages(source: CitedSource) -> str:
    """`page 3` or `pages 3–4` for a source in a PDF; empty for other formats."""
    return _span("page", source.pages)


def _span(noun: str, numbers: list[int]) -> str:
    """`chunk 3` or `chunks 3–4`; empty without numbers."""
    if not numbers:
        return ""
    first, last = min(numbers), max(numbers)
    return f"{noun} {first}" if first == last else f"{noun}s {first}–{last}"


def _shortened(text: str) -> str:
    """At most PREVIEW_CHARS, cut at a word; a plain slice (Django's Truncator walks every character
    for combining marks, which cost a chat page of ten answers about 10 ms)."""
    if len(text) <= PREVIEW_CHARS:
        return text
    return text[: PREVIEW_CHARS - 1].rsplit(" ", 1)[0].rstrip() + "…"


@register.filter
def message_markup(entry: TranscriptEntry) -> SafeString:
    """The message rendered by `knowledge.markup`, which escapes everything it does not build. An
    answer's marker naming none of its sources is dropped; a question keeps what the asker typed."""
    previews = {source.marker: citation_preview(source) for source in entry.sources}
    message = entry.message
    html = message_html(
        message.content, message_id=str(message.id), previews=previews, keep_unknown_markers=message.role == "user"
    )
    return mark_safe(html)


@register.filter
def person(user_id: str, people: dict[str, Any]) -> str:
    user = people.get(user_id)
    return user.name if user else user_id


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    return mapping.get(key, key)

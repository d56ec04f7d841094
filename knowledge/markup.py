"""Chat messages as safe HTML: Markdown with raw HTML off, and `[n]` markers as citation links.

Answers come from an answerer (an LLM, one day) quoting documents anyone may upload, so every
message is hostile input. markdown-it-py escapes all text and attributes; on top of that raw HTML
is switched off (it is shown as text), images are off (an answer cannot make the reader's browser
fetch a URL), and links may only go to http, https, mailto or a relative path: `javascript:`,
`data:`, `vbscript:` and any other scheme leave the text unlinked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token

ALLOWED_SCHEMES = frozenset({"http", "https", "mailto"})
# A page has its h1 and h2; a heading inside a message starts two levels below.
HEADING_SHIFT = 2
_SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*):")
_CONTROL = re.compile(r"[\x00-\x20\x7f]+")
# `[n]` not followed by `(`: `[1](https://...)` stays an ordinary link whose text is 1.
_MARKER = re.compile(r"\[(\d{1,4})\](?!\()")
# Markers of one message that become links: a real answer cites a few dozen times; a hostile one
# writes `[1]` 16,000 times in 50,000 characters, each link about 150 bytes of page. Past this,
# markers stay text (their source is still listed under the answer, with its preview once).
MAX_LINKED_MARKERS = 500


@dataclass(frozen=True)
class CitationPreview:
    """What hovering or focusing marker `[n]` shows: where the passage is from, its headings, its text.
    A message renders each once, however many markers cite it."""

    source: str
    text: str
    title: str = ""


def link_allowed(url: str) -> bool:
    """http(s), mailto and relative links only; control characters cannot hide a scheme."""
    scheme = _SCHEME.match(_CONTROL.sub("", url).lower())
    return scheme is None or scheme.group(1) in ALLOWED_SCHEMES


def _marker_rule(state: StateInline, silent: bool) -> bool:
    if state.src[state.pos] != "[":
        return False
    match = _MARKER.match(state.src, state.pos)
    if match is None:
        return False
    if not silent:
        token = state.push("cite_marker", "", 0)
        token.content = match.group(0)
        token.meta = {"number": int(match.group(1))}
    state.pos = match.end()
    return True


def _render_marker(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    token = tokens[idx]
    number = token.meta["number"]
    preview = env["previews"].get(number)
    if preview is None:
        # A marker naming no source of the message: an answer's is invented (dropped), a question's
        # is what the asker typed (kept as text).
        return escapeHtml(token.content) if env["keep_unknown_markers"] else ""
    # Markers inside a link (an anchor cannot hold another), and past the message's share of
    # links, stay text.
    if env.get("link_depth", 0) > 0 or env["linked"] >= MAX_LINKED_MARKERS:
        return escapeHtml(token.content)
    env["linked"] += 1
    env["cited"].setdefault(number, preview)
    message_id = escapeHtml(env["message_id"])
    return (
        '<span class="kb-cite">'
        f'<a class="kb-marker" href="#cite-{message_id}-{number}" data-marker="{number}" data-testid="marker" '
        f'aria-describedby="preview-{message_id}-{number}">[{number}]</a></span>'
    )


def _previews_html(cited: Mapping[int, CitationPreview], message_id: str) -> str:
    """One preview per cited source, hidden after the message; every marker of the source is
    described by it, and the page's script shows it beside the marker hovered or focused."""
    if not cited:
        return ""
    escaped_id = escapeHtml(message_id)
    previews = []
    for number, preview in cited.items():
        title = (
            f'<span class="kb-preview-title" data-testid="preview-title">{escapeHtml(preview.title)}</span> '
            if preview.title
            else ""
        )
        previews.append(
            f'<span class="kb-preview" role="tooltip" id="preview-{escaped_id}-{number}" '
            'data-testid="citation-preview">'
            f'<span class="kb-preview-source">{escapeHtml(preview.source)}</span> {title}'
            f'<span class="kb-preview-text">{escapeHtml(preview.text)}</span></span>'
        )
    return f'<div class="kb-previews" hidden>{"".join(previews)}</div>'


def _render_link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    env["link_depth"] = env.get("link_depth", 0) + 1
    tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
    return self.renderToken(tokens, idx, options, env)


def _render_link_close(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    env["link_depth"] = env.get("link_depth", 1) - 1
    return self.renderToken(tokens, idx, options, env)


def _render_heading(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    token = tokens[idx]
    token.tag = f"h{min(int(token.tag[1]) + HEADING_SHIFT, 6)}"
    return self.renderToken(tokens, idx, options, env)


def _render_table_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    # Wide tables scroll inside the message instead of widening the page on a phone; a keyboard
    # reaches what scrolls (tabindex), as it does code blocks below.
    return '<div class="kb-table" tabindex="0">' + self.renderToken(tokens, idx, options, env)


def _render_table_close(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    return self.renderToken(tokens, idx, options, env) + "</div>"


def _focusable_pre(default: Any) -> Any:
    def render(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
        html = default(tokens, idx, options, env)
        return html.replace("<pre>", '<pre tabindex="0">', 1)

    return render


def _renderer() -> MarkdownIt:
    md = (
        MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
        .enable(["table", "strikethrough"])
        .disable(["html_block", "html_inline", "image"])
    )
    md.validateLink = link_allowed
    md.inline.ruler.before("link", "cite_marker", _marker_rule)
    md.add_render_rule("cite_marker", _render_marker)
    md.add_render_rule("link_open", _render_link_open)
    md.add_render_rule("link_close", _render_link_close)
    md.add_render_rule("heading_open", _render_heading)
    md.add_render_rule("heading_close", _render_heading)
    md.add_render_rule("table_open", _render_table_open)
    md.add_render_rule("table_close", _render_table_close)
    for block in ("fence", "code_block"):
        md.add_render_rule(block, _focusable_pre(md.renderer.rules[block]))
    return md


_MARKDOWN = _renderer()


def message_html(
    text: str, *, message_id: str, previews: Mapping[int, CitationPreview], keep_unknown_markers: bool = False
) -> str:
    """The message as HTML that is safe to insert as is: `[n]` with a preview becomes a marker, one
    without is dropped (an answer's) or kept as text (`keep_unknown_markers`: a question's)."""
    env: dict[str, Any] = {
        "message_id": message_id,
        "previews": dict(previews),
        "keep_unknown_markers": keep_unknown_markers,
        "linked": 0,
        "cited": {},
    }
    html = _MARKDOWN.render(text, env)
    return html + _previews_html(env["cited"], message_id)

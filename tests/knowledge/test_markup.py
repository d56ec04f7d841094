"""Chat messages as Markdown (knowledge/markup.py): what renders, and that hostile answers and documents
cannot run script, inject HTML or smuggle a `javascript:` link."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.test import Client

from knowledge.markup import MAX_LINKED_MARKERS, CitationPreview, link_allowed, message_html

# Everything the renderer may produce; anything else in its output is an injection.
ALLOWED_TAGS = {
    "p", "em", "strong", "s", "code", "pre", "blockquote", "ul", "ol", "li", "hr", "br", "a", "span", "div",
    "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "href", "rel", "title", "class", "id", "role", "start", "style", "tabindex", "hidden",
    "data-marker", "data-testid", "aria-describedby",
}  # fmt: skip

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">click</a>',
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](java\tscript:alert(1))",
    "[click](  javascript:alert(1))",
    "[click](&#106;avascript:alert(1))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[click](vbscript:msgbox(1))",
    "[click][ref]\n\n[ref]: javascript:alert(1)",
    "<javascript:alert(1)>",
    "![x](https://tracker.example/pixel.png)",
    '[x](https://example.com "a" onmouseover="alert(1)")',
    "<svg onload=alert(1)>",
    "<iframe src=//evil.example></iframe>",
    "```html\n<script>alert(1)</script>\n```",
    '<div style="background:url(javascript:alert(1))">x</div>',
    "[1](javascript:alert(1)) and [1]",
    "<<script>script>alert(1)<</script>/script>",
]


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.extend((name, value or "") for name, value in attrs)


def _parsed(html: str) -> _Collector:
    collector = _Collector()
    collector.feed(html)
    return collector


def _render(text: str, markers: tuple[int, ...] = (), *, question: bool = False) -> str:
    previews = {
        number: CitationPreview(source=f"[{number}] quotas.md, chunk 1:", text="<b>x</b>") for number in markers
    }
    return message_html(text, message_id="msg_1", previews=previews, keep_unknown_markers=question)


@pytest.mark.parametrize("payload", HOSTILE)
def test_a_hostile_answer_renders_only_harmless_tags_attributes_and_links(payload):
    # Given an answer carrying an injection attempt, with marker [1] known
    # When it is rendered
    parsed = _parsed(_render(payload, markers=(1,)))

    # Then every tag and attribute is one the renderer makes, and no link or style carries script
    assert parsed.tags <= ALLOWED_TAGS
    assert {name for name, _value in parsed.attributes} <= ALLOWED_ATTRIBUTES - {"style"}
    for name, value in parsed.attributes:
        if name == "href":
            assert link_allowed(value), value
            assert "script:" not in value.lower()


def test_raw_html_is_shown_as_text():
    # Given an answer with a script tag
    # When it is rendered
    html = _render("Run <script>alert(1)</script> now")

    # Then the tag is escaped text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html


def test_a_javascript_link_stays_text():
    # Given an answer linking to javascript:
    # When it is rendered / Then no anchor is made of it
    assert "<a" not in _render("[click](javascript:alert(1))")


def test_images_are_not_loaded():
    # Given an answer with an image
    # When it is rendered / Then there is no img tag (the browser fetches nothing)
    assert "<img" not in _render("![pixel](https://tracker.example/p.png)")


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://example.com/a", True),
        ("http://example.com", True),
        ("mailto:ops@example.com", True),
        ("/kb/chats", True),
        ("#cite-1", True),
        ("quotas.md", True),
        ("javascript:alert(1)", False),
        ("JAVASCRIPT:alert(1)", False),
        ("java\x00script:alert(1)", False),
        (" \tjavascript:alert(1)", False),
        ("data:text/html,hi", False),
        ("vbscript:x", False),
        ("file:///etc/passwd", False),
    ],
)
def test_links_may_go_to_http_mailto_or_a_relative_path_only(url, allowed):
    # Given a link target / When it is checked / Then only the safe schemes pass
    assert link_allowed(url) is allowed


def test_links_get_rel_nofollow_noopener():
    # Given an answer with a web link / When it is rendered
    html = _render("See [the docs](https://example.com/docs).")

    # Then the link keeps its target and tells the browser not to pass on the page
    assert '<a href="https://example.com/docs" rel="nofollow noopener noreferrer">the docs</a>' in html


def test_markdown_blocks_render():
    # Given an answer with emphasis, a list, code, a table and a heading
    text = (
        "# Steps\n\nDo **this** and *that*:\n\n1. open `my-resources`\n2. close a sandbox\n\n"
        "```\nmake run\n```\n\n| limit | value |\n|---|---|\n| cpu | 2 |\n"
    )

    # When it is rendered
    html = _render(text)

    # Then each is its HTML element; the heading sits two levels below the page's own
    for fragment in ("<h3>Steps</h3>", "<strong>this</strong>", "<em>that</em>", "<ol>", "<code>my-resources</code>"):
        assert fragment in html
    assert '<pre tabindex="0"><code>make run\n</code></pre>' in html
    assert '<div class="kb-table" tabindex="0"><table>' in html


def test_a_known_marker_becomes_a_link_with_its_preview():
    # Given an answer citing [1], whose passage is known
    # When it is rendered
    html = _render("Close a sandbox [1].", markers=(1,))

    # Then [1] links to its source and is described by its preview, whose text is escaped
    assert '<a class="kb-marker" href="#cite-msg_1-1"' in html
    assert 'aria-describedby="preview-msg_1-1"' in html
    assert '<span class="kb-preview" role="tooltip" id="preview-msg_1-1"' in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html


def test_a_source_cited_many_times_has_one_preview_that_each_of_its_markers_names():
    # Given an answer citing [1] three times and [2] once
    # When it is rendered
    html = _render("One [1], again [1], [2] and [1].", markers=(1, 2))

    # Then each source's preview is on the page once, hidden after the message, and every marker
    # is described by its source's preview
    assert html.count('data-testid="citation-preview"') == 2
    assert html.count('aria-describedby="preview-msg_1-1"') == 3
    assert html.count('aria-describedby="preview-msg_1-2"') == 1
    assert html.index('<div class="kb-previews" hidden>') > html.rindex('class="kb-marker"')


def test_a_marker_no_source_was_given_for_is_dropped_from_an_answer():
    # Given [1] known, and an answer that also writes [2] and [1234]
    # When it is rendered
    html = _render("Known [1], invented [2] and [1234].", markers=(1,))

    # Then [1] is a marker and the invented ones are not on the page at all
    assert html.count('class="kb-marker"') == 1
    assert "[2]" not in html
    assert "[1234]" not in html


def test_a_questions_brackets_stay_as_the_asker_typed_them():
    # Given a question (no sources) that mentions [2]
    # When it is rendered as a question
    html = _render("What does [2] in the runbook mean?", question=True)

    # Then [2] is text, neither a marker nor dropped
    assert "[2] in the runbook" in html
    assert "kb-marker" not in html


@pytest.mark.parametrize("text", ["In code `[1]`.", "```\n[1]\n```"])
def test_markers_in_code_stay_text(text):
    # Given [1] known, and an answer with [1] in code
    # When it is rendered / Then no marker link is made and the code keeps it
    html = _render(text, markers=(1,))
    assert "kb-marker" not in html
    assert "[1]" in html


def test_past_the_linked_marker_bound_markers_stay_text_and_the_preview_is_still_once():
    # Given an answer citing [1] more often than a message links
    count = MAX_LINKED_MARKERS + 50
    html = _render("[1] " * count, markers=(1,))

    # Then the first MAX_LINKED_MARKERS are links, the rest text, and the preview is there once
    body = html[: html.index('<div class="kb-previews"')]
    assert body.count('class="kb-marker"') == MAX_LINKED_MARKERS
    assert body.count("[1]") == count
    assert html.count('data-testid="citation-preview"') == 1


def test_a_marker_inside_a_links_text_never_nests_one_anchor_in_another():
    # Given [1] known, and an answer whose link text holds [1]
    # When it is rendered
    html = _render("A [link with [1] inside](https://example.com).", markers=(1,))

    # Then the marker wins and the link stays text: one anchor, the marker's
    assert html.count("<a ") == 1
    assert '<a class="kb-marker"' in html


HOSTILE_DOCUMENT = (
    "Quota refusals <script>alert('doc')</script> are answered with status 507.\n\n"
    "Quota help is at [help](javascript:alert('doc')) and <img src=x onerror=alert('doc')> too."
)


@pytest.mark.django_db
def test_a_chat_quoting_a_hostile_document_shows_no_markup_of_it(make_collection, upload, make_chat, ask):
    # Given a collection holding a plain-text document full of markup, and alice's chat over it
    collection = make_collection("Planted")
    upload(collection.id, "planted.txt", HOSTILE_DOCUMENT)
    chat = make_chat(collection)

    # When she asks about it and opens the chat page
    assert ask(chat.id, "quota refusals help").status_code == 201
    page = Client(HTTP_ACCEPT="text/html", HTTP_X_USER_ID="alice").get(f"/kb/chats/{chat.id}").content.decode()
    transcript = page[page.index('data-testid="transcript"') : page.index("</main>")]

    # Then the quote is there as text, with none of its tags or its javascript: link live
    assert "alert(&#x27;doc&#x27;)" in transcript or "alert('doc')" in transcript
    parsed = _parsed(transcript)
    assert not parsed.tags & {"script", "img", "iframe", "svg"}
    assert not any(value.lower().startswith("javascript") for name, value in parsed.attributes if name == "href")
    assert not any(name.startswith("on") for name, _value in parsed.attributes)

"""Chat messages as Markdown (knowledge/markup.py): what renders, and that hostile answers and documents
cannot run script, inject HTML or smuggle a `javascript:` link."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.test import Client

from knowledge.markup import CitationPreview, link_allowed, message_html

# Everything the renderer may produce; anything else in its output is an injection.
ALLOWED_TAGS = {
    "p", "em", "strong", "s", "code", "pre", "blockquote", "ul", "ol", "li", "hr", "br", "a", "span", "div",
    "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "href", "rel", "title", "class", "id", "role", "start", "style", "tabindex",
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


def _render(text: str, markers: tuple[int, ...] = ()) -> str:
    previews = {
        number: CitationPreview(source=f"[{number}] quotas.md, chunk 1:", text="<b>x</b>") for number in markers
    }
    return message_html(text, message_id="msg_1", previews=previews)


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
    assert 'aria-describedby="preview-msg_1-1-1"' in html
    assert '<span class="kb-preview" role="tooltip" id="preview-msg_1-1-1"' in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html


def test_a_marker_used_twice_gets_two_previews_with_distinct_ids():
    # Given an answer citing [1] twice
    # When it is rendered
    html = _render("One [1], again [1].", markers=(1,))

    # Then each occurrence has its own preview id
    assert 'id="preview-msg_1-1-1"' in html
    assert 'id="preview-msg_1-1-2"' in html


@pytest.mark.parametrize("text", ["Unknown [2].", "In code `[1]`.", "```\n[1]\n```"])
def test_markers_without_a_source_or_in_code_stay_text(text):
    # Given [1] known, and an answer naming [2], or [1] in code
    # When it is rendered / Then no marker link is made
    assert "kb-marker" not in _render(text, markers=(1,))


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

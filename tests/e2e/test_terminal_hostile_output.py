"""In a real browser: what a program in the sandbox prints on the item page's shell (issue 43) is
hostile input. Escape sequences and text that looks like HTML cannot script the page, write the
clipboard, retitle the page or make a `javascript:` link clickable: xterm.js 6 as the page loads it
(no clipboard addon, OSC 8 links only for http and https, the title kept to the terminal) shows
them as text or swallows them.

Each command builds the words the test looks for from pieces (`''`, `%s`), so that the line the
shell echoes as it is typed never contains them: what the page shows of them is the output's."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

# What the page's xterm.js asks before it opens a link of the terminal's (OSC 8) for anyone.
XTERM_LINK_QUESTION = "Do you want to navigate to"


@pytest.fixture(autouse=True)
def local_sandboxes(deployment) -> None:
    deployment("[sandbox]\nexec_timeout = '30s'\n")


def _open_shell(page_as, make_notebook):
    """bob's notebook page with a live shell, the keyboard on it."""
    item = make_notebook("Hostile output")
    page = page_as("bob")
    page.goto(f"/a/notebook/items/{item.pk}")
    page.click("[data-testid=shell-open]")
    page.wait_for_selector("[data-testid=shell-state][data-state=live]")
    page.locator("[data-testid=shell-screen]:visible .xterm").click()
    return page


def _run(page, command: str, *, then_says: str) -> None:
    """Types `command` and waits until its output says `then_says` (which the typed line must not)."""
    assert then_says not in command
    page.keyboard.type(command + "\n")
    page.wait_for_function(
        "text => [...document.querySelectorAll('.xterm-accessibility')].some(n => n.innerText.includes(text))",
        arg=then_says,
    )


def _text(page) -> str:
    """What the shell shows, as its screen-reader rows read it."""
    return page.locator("[data-testid=shell-screen]:visible .xterm-accessibility").inner_text()


# Where `text` is drawn on the shell's screen (the middle of its first occurrence in the rows xterm.js
# renders), in page coordinates for the mouse.
_DRAWN_AT = """text => {
  const rows = document.querySelector('[data-testid=shell-screen]:not([hidden]) .xterm-rows');
  const walker = document.createTreeWalker(rows, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const at = node.data.indexOf(text);
    if (at < 0) continue;
    const range = document.createRange();
    range.setStart(node, at);
    range.setEnd(node, at + text.length);
    const box = range.getBoundingClientRect();
    return {x: box.x + box.width / 2, y: box.y + box.height / 2};
  }
  return null;
}"""


def _drawn_at(page, text: str) -> tuple[float, float]:
    where = page.evaluate(_DRAWN_AT, text)
    assert where is not None, f"{text!r} is not drawn on the shell's screen:\n{_text(page)}"
    return where["x"], where["y"]


def test_an_osc_52_clipboard_write_in_the_output_leaves_the_clipboard_as_it_was(page_as, make_notebook):
    # Given bob's shell, in a browser that lets the page read and write his clipboard, which holds
    # a value of his
    page = _open_shell(page_as, make_notebook)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.evaluate("navigator.clipboard.writeText('bobs own words')")
    assert page.evaluate("navigator.clipboard.readText()") == "bobs own words"
    # When a command prints an OSC 52 sequence that asks the terminal to put "pwned" there
    _run(page, "printf '\\033]52;c;%s\\a' \"$(printf pwned | base64)\"; echo osc52-''done", then_says="osc52-done")
    # Then his clipboard still holds his value, though the page could have written it
    assert page.evaluate("navigator.clipboard.readText()") == "bobs own words"


def test_output_that_looks_like_html_is_shown_as_text_and_runs_nothing(page_as, make_notebook):
    # Given bob's shell, and the page's elements as they are
    page = _open_shell(page_as, make_notebook)
    scripts_before = page.evaluate("document.scripts.length")
    # When a command prints an image tag with an error handler and a script tag
    _run(page, "echo '<img src=x onerror=\"window.__pwned=1\">'", then_says='onerror="window.__pwned=1">\n')
    _run(page, "echo '<script>window.__pwned=2</''script>'", then_says="window.__pwned=2</script>")
    # Then the shell shows them as the text they are, no such element entered the page, and nothing ran
    text = _text(page)
    assert '<img src=x onerror="window.__pwned=1">\n' in text
    assert "<script>window.__pwned=2</script>\n" in text
    assert page.locator("img[onerror], img[src=x]").count() == 0
    assert page.evaluate("document.scripts.length") == scripts_before
    assert page.evaluate("typeof window.__pwned") == "undefined"


def test_a_title_sequence_in_the_output_is_swallowed_and_leaves_the_page_title_alone(page_as, make_notebook):
    # Given bob's shell on his notebook's page, with its title
    page = _open_shell(page_as, make_notebook)
    title = page.title()
    # When a command prints OSC 0 and OSC 2 sequences that set the terminal's title
    _run(
        page,
        "printf '\\033]0;%s-zero\\a\\033]2;%s-two\\a' pwned pwned; echo title-''done",
        then_says="title-done",
    )
    # Then the terminal took them as sequences (their text is not shown), and the page keeps its title
    assert "pwned-zero" not in _text(page)
    assert "pwned-two" not in _text(page)
    assert page.title() == title
    assert "pwned" not in page.evaluate("document.title")


def test_an_osc_8_link_to_javascript_is_plain_text_while_an_https_one_asks_before_it_opens(page_as, make_notebook):
    # Given bob's shell that printed, on one line, an OSC 8 link to an https address and one to
    # `javascript:`, and the page's dialogs recorded (and dismissed)
    page = _open_shell(page_as, make_notebook)
    _run(
        page,
        "printf '\\033]8;;https://example.invalid/\\a%s-web\\033]8;;\\a and "
        "\\033]8;;javascript:window.__pwned=8\\a%s-js\\033]8;;\\a\\n' link link",
        then_says="link-web and link-js",
    )
    asked: list[str] = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    screen = page.locator("[data-testid=shell-screen]:visible .xterm")
    # When he points at the https link, then at the javascript: one, and clicks the javascript: one
    page.mouse.move(*_drawn_at(page, "link-web"))
    page.wait_for_selector("[data-testid=shell-screen]:visible .xterm-cursor-pointer")
    page.mouse.move(*_drawn_at(page, "link-js"))
    # Then the https link is a link (the pointer), the javascript: one is not: its line's links are
    # known since the first, so the pointer is gone as the mouse reaches it
    page.wait_for_selector("[data-testid=shell-screen]:visible .xterm-cursor-pointer", state="detached")
    page.mouse.click(*_drawn_at(page, "link-js"))
    # And clicking it asks nothing and runs nothing, where clicking the https one asks first
    with page.expect_event("dialog"):
        page.mouse.click(*_drawn_at(page, "link-web"))
    assert len(asked) == 1, asked
    assert asked[0].startswith(f"{XTERM_LINK_QUESTION} https://example.invalid/?")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert screen.locator("a[href^='javascript:' i]").count() == 0
    assert page.locator("a[href^='javascript:' i]").count() == 0

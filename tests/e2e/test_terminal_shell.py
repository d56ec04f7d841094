"""In a real browser, at a desktop width and at 390 px: the item page's shell (issue 43) is a real
terminal: a REPL answers, Ctrl-C interrupts, a reload shows the same session with what it printed,
another window takes it over without the two fighting, and an exited shell shows its code."""

from __future__ import annotations

import pytest

from collab.slots import slot_release, slot_take
from tests.e2e.browser import assert_accessible, assert_no_sideways_scroll, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def local_sandboxes(deployment) -> None:
    deployment("[sandbox]\nexec_timeout = '30s'\n")


def _text(page) -> str:
    """What the shell shows, as its screen-reader rows read it."""
    return page.locator("[data-testid=shell-screen]:visible .xterm-accessibility").inner_text()


def _open_shell(page_as, make_notebook, viewport=None):
    item = make_notebook("Shell")
    page = page_as("bob", viewport=viewport)
    page.goto(f"/a/notebook/items/{item.pk}")
    page.click("[data-testid=shell-open]")
    page.wait_for_selector("[data-testid=shell-state][data-state=live]")
    page.locator("[data-testid=shell-screen]:visible .xterm").click()
    return page, item


def _type(page, text: str) -> None:
    page.keyboard.type(text)


def _shows(page, text: str) -> None:
    page.wait_for_function(
        "text => [...document.querySelectorAll('.xterm-accessibility')].some(n => n.innerText.includes(text))",
        arg=text,
    )


@pytest.mark.parametrize("viewport", [None, {"width": 390, "height": 844}], ids=["desktop", "phone"])
def test_a_repl_answers_and_ctrl_c_interrupts(page_as, make_notebook, viewport):
    # Given bob's shell in his notebook
    page, _item = _open_shell(page_as, make_notebook, viewport)
    # When he asks Python a sum, leaves it, then interrupts a long sleep
    _type(page, "python3 -q\n")
    _shows(page, ">>>")
    _type(page, "6 * 7\n")
    _shows(page, "42")
    page.keyboard.press("Control+D")
    _type(page, "sleep 100\n")
    page.wait_for_timeout(500)  # the shell forks sleep after it echoed the line
    page.keyboard.press("Control+C")
    _type(page, "echo in''terrupted\n")
    # Then the REPL answered and the shell came back at once
    _shows(page, "interrupted\n")
    assert "42" in _text(page)
    assert_no_sideways_scroll(page)
    assert_accessible(page)
    screenshot(page, f"shell-{'phone' if viewport else 'desktop'}")


def test_a_reload_shows_the_same_session_with_what_it_printed_once(page_as, make_notebook):
    # Given bob's shell that printed a line
    page, _item = _open_shell(page_as, make_notebook)
    _type(page, "echo kept-''across-reloads\n")
    _shows(page, "kept-across-reloads")
    # When he reloads the page
    page.reload()
    page.wait_for_selector("[data-testid=shell-state][data-state=live]")
    _shows(page, "kept-across-reloads")
    # Then the same shell is there, with its output once, and it goes on
    assert page.locator("[data-testid=shell-tab]").count() == 1
    assert _text(page).count("kept-across-reloads") == 2  # the typed line and its output
    page.locator("[data-testid=shell-screen]:visible .xterm").click()
    _type(page, "echo still-''here\n")
    _shows(page, "still-here")


def test_another_window_takes_the_shell_over_and_the_first_says_so_without_fighting(page_as, make_notebook):
    # Given bob's shell open in one window
    page, item = _open_shell(page_as, make_notebook)
    # When he opens the same notebook in another window
    other = page_as("bob")
    other.goto(f"/a/notebook/items/{item.pk}")
    other.wait_for_selector("[data-testid=shell-state][data-state=live]")
    # Then the first window says the shell is open elsewhere and stays so, and the second types on
    page.wait_for_selector("[data-testid=shell-state][data-state=elsewhere]")
    page.wait_for_timeout(1500)
    assert other.locator("[data-testid=shell-state]").get_attribute("data-state") == "live"
    other.locator("[data-testid=shell-screen]:visible .xterm").click()
    other.keyboard.type("echo from-the-''second\n")
    _shows(other, "from-the-second")


def test_an_exited_shell_shows_its_code_and_a_reload_does_not_start_it_again(page_as, make_notebook):
    # Given bob's shell
    page, _item = _open_shell(page_as, make_notebook)
    # When its shell exits with 5, and he reloads
    _type(page, "exit 5\n")
    page.wait_for_selector("[data-testid=shell-state][data-state=exited]")
    first = page.locator("[data-testid=shell-state]").inner_text()
    page.reload()
    page.wait_for_selector("[data-testid=shell-state][data-state=exited]")
    # Then both say it exited with 5
    assert first == "exited with 5"
    assert page.locator("[data-testid=shell-state]").inner_text() == "exited with 5"


def test_a_command_started_while_every_slot_is_taken_is_stopped_and_the_page_says_why(settings, page_as, make_notebook):
    # Given bob may run one command at once, and one of his runs elsewhere
    settings.WORKSPACE_EXEC_CONCURRENCY_PER_USER = 1
    elsewhere = slot_take(user_id="bob", seconds=60)
    page, _item = _open_shell(page_as, make_notebook)
    # When he starts a long command in his shell
    _type(page, "sleep 100\n")
    # Then the shell stopped it, as Ctrl-Z would, and the page says why and how to go on
    refusal = page.wait_for_selector("[data-testid=shell] [data-testid=refusal]")
    _shows(page, "Stopped")
    assert "fg" in refusal.inner_text()
    slot_release(elsewhere)


@pytest.mark.parametrize("keys", ["Control+V", "Control+Shift+V"])
def test_text_pasted_into_the_shell_is_typed_there(page_as, make_notebook, keys):
    # Given bob's shell, and a command on his clipboard
    page, _item = _open_shell(page_as, make_notebook)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.evaluate("navigator.clipboard.writeText(\"echo pas''ted\")")
    page.locator("[data-testid=shell-screen]:visible .xterm").click()
    # When he pastes it and, once it is on the line, presses Enter
    page.keyboard.press(keys)
    _shows(page, "echo pas''ted")
    page.keyboard.press("Enter")
    # Then the shell ran it
    _shows(page, "pasted\n")


def test_the_selection_is_copied_with_ctrl_shift_c_and_ctrl_c_still_interrupts_without_one(page_as, make_notebook):
    # Given bob's shell that printed a word
    page, _item = _open_shell(page_as, make_notebook)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    _type(page, "echo copy''me\n")
    _shows(page, "copyme\n")
    # When he drags over its first lines with the mouse and presses Ctrl+Shift+C
    page.evaluate("navigator.clipboard.writeText('before')")
    screen = page.locator("[data-testid=shell-screen]:visible .xterm-screen").bounding_box()
    page.mouse.move(screen["x"] + 2, screen["y"] + 3)
    page.mouse.down()
    page.mouse.move(screen["x"] + screen["width"] - 5, screen["y"] + 60, steps=5)
    page.mouse.up()
    page.keyboard.press("Control+Shift+C")
    # Then what he selected is on his clipboard, and Ctrl+C without a selection still interrupts
    page.wait_for_function("async () => (await navigator.clipboard.readText()).includes('copyme')")
    _type(page, "sleep 100\n")
    page.wait_for_timeout(500)  # the shell forks sleep after it echoed the line
    page.keyboard.press("Control+C")
    _type(page, "echo af''ter\n")
    _shows(page, "after\n")

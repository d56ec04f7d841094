"""Checks every browser test may run on a page: accessibility (axe-core), no sideways scroll, and
screenshots kept for a person to look at."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
VIEWPORTS = {"desktop": DESKTOP, "phone": PHONE}

# Where screenshots go: outside the repository's tracked files, kept after the run for review.
SCREENSHOTS = Path(os.environ.get("WORKSPACE_SCREENSHOTS", Path(__file__).resolve().parents[2] / "var" / "screenshots"))
_BLOCKING_IMPACTS = {"serious", "critical"}
# axe's experimental rules are off unless named; this one (WCAG 2.5.3, a control's visible text
# inside its accessible name, so voice control finds it by what it shows) is one a person meets.
_AXE_OPTIONS = {"resultTypes": ["violations"], "rules": {"label-content-name-mismatch": {"enabled": True}}}


def accessibility_violations(page: Any, *, every_impact: bool = False) -> list[str]:
    """axe-core's serious and critical violations (or, with `every_impact`, all of them) on the page
    as it stands, one line each."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, options=_AXE_OPTIONS)
    return [
        f"{violation['id']} ({violation['impact']}): {violation['help']} at "
        + ", ".join(" ".join(node["target"]) for node in violation["nodes"][:3])
        for violation in results.response["violations"]
        if every_impact or violation.get("impact") in _BLOCKING_IMPACTS
    ]


def assert_accessible(page: Any) -> None:
    violations = accessibility_violations(page)
    assert not violations, "\n".join(violations)


def sideways_overflow(page: Any) -> int:
    """How many CSS pixels the page is wider than its viewport (0 when nothing scrolls sideways)."""
    return int(page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth"))


def assert_no_sideways_scroll(page: Any) -> None:
    overflow = sideways_overflow(page)
    assert overflow <= 0, f"{page.url} scrolls sideways by {overflow}px at {page.viewport_size['width']}px"


def screenshot(page: Any, name: str) -> Path:
    """Saves a full-page screenshot named after the test and the viewport width, for review."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    width = page.viewport_size["width"] if page.viewport_size else 0
    target = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}-{width}.png"
    page.screenshot(path=str(target), full_page=True)
    return target


# Every control and table cell of the page's main part a person cannot see without scrolling
# sideways: drawn past the viewport's edge, or past the edge of a box that scrolls sideways
# (a wide table inside its card). Hidden things (a closed menu, a visually hidden label) do not count.
_OFF_SCREEN = """() => {
  const width = document.documentElement.clientWidth;
  const found = [];
  const controls = "main a[href], main button, main summary, main input:not([type=hidden]), main select, main td";
  for (const node of document.querySelectorAll(controls)) {
    const box = node.getBoundingClientRect();
    if (!box.width || !box.height || node.closest(".visually-hidden")) continue;
    let cut = box.right > width + 0.5 || box.left < -0.5;
    for (let up = node.parentElement; up && !cut; up = up.parentElement) {
      if (!["auto", "scroll", "hidden"].includes(getComputedStyle(up).overflowX)) continue;
      const outer = up.getBoundingClientRect();
      cut = up.scrollWidth > up.clientWidth + 1 && (box.right > outer.right + 0.5 || box.left < outer.left - 0.5);
    }
    if (cut) found.push(`${node.tagName.toLowerCase()} ${node.dataset.testid || node.textContent.trim().slice(0, 40)}`);
  }
  return found;
}"""


def off_screen(page: Any) -> list[str]:
    """The page's controls and table cells a person would have to scroll sideways to reach."""
    return list(page.evaluate(_OFF_SCREEN))


def assert_every_action_on_screen(page: Any) -> None:
    hidden = off_screen(page)
    assert not hidden, f"{page.url} at {page.viewport_size['width']}px hides sideways: {hidden}"
    assert_no_sideways_scroll(page)


def open_file_box(row: Any, name: str) -> Any:
    """Opens a file row's Rename or Shrink box and returns its field once the page has put the
    cursor in it. The page does that on the box's toggle event, a moment after the click (later
    on a loaded machine): text typed before then could land in the part of the name the page
    then selects ("b.txt" over the "a" of "a.txt" gives "b.txt.txt")."""
    from playwright.sync_api import expect

    row.locator("summary", has_text=name).click()
    field = row.locator("details[open] input:not([type=hidden])").first
    expect(field).to_be_focused()
    return field


def wait_until_ended(page: Any, status: Any, *, timeout_ms: int = 30_000) -> None:
    """Waits until a terminal block's status (`[data-testid=exec-status]`) no longer says its
    command runs, whatever it ended with, so a failing test can say what it ended with."""
    page.wait_for_function("node => node.dataset.state !== 'running'", arg=status.element_handle(), timeout=timeout_ms)

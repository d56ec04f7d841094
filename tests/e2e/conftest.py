"""Browser fixtures: Playwright's sync API driving Debian's chromium against a live server."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.browser import DESKTOP, VIEWPORTS

# Playwright's sync API keeps an event loop on the test thread; the ORM calls a test makes
# there are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = Path(os.environ.get("WORKSPACE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# How long a step waits for the page before it fails. CI runs its two halves side by side on two
# cores, and on a slow day of the machine every process start takes two to three times as long:
# the out-of-memory terminal test, 3 s alone, once needed more than 30 there. A passing test
# waits no longer for it.
STEP_TIMEOUT_MS = 20_000


# In CI's two halves (WORKSPACE_CI_SUITE, tests/conftest.py) a test run at both widths (the
# `viewport` fixture) runs at one width per database: desktop beside SQLite, phone beside
# PostgreSQL. Each test still runs on both databases and at both widths; what is left out is
# the pairing of a width with a database, and a page's layout does not depend on the database
# nor its queries on the width. It saves a fifth of each half.
_WIDTH_OF_HALF = {"sqlite": "desktop", "postgresql": "phone"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    width = _WIDTH_OF_HALF.get(os.environ.get("WORKSPACE_CI_SUITE", ""))
    kept, deselected = [], []
    for item in items:
        if "tests/e2e/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)
        params = getattr(item, "callspec", None)
        other_width = width and params is not None and params.params.get("viewport", width) != width
        (deselected if other_width else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        reason = f"Debian chromium is not installed at {CHROMIUM} (apt-get install -y chromium)"
        if os.environ.get("WORKSPACE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{reason}, and WORKSPACE_REQUIRE_BROWSER=1 forbids skipping browser tests.")
        pytest.skip(f"{reason}; browser tests skipped.")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(autouse=True)
def private_workspaces(settings, tmp_path) -> None:
    """Every browser test keeps its workspaces and sandbox limits in its own var dir."""
    settings.WORKSPACE_VAR_DIR = tmp_path / "var"
    settings.WORKSPACE_CGROUP_ROOT = str(tmp_path / "cgroup")
    settings.WORKSPACE_CGROUP_DRIVER = "prlimit"


@pytest.fixture(params=["desktop", "phone"])
def viewport(request: pytest.FixtureRequest) -> dict[str, int]:
    """Runs a test at a desktop width and at 390 px (a phone); pass it to `page_as`."""
    return VIEWPORTS[request.param]


@pytest.fixture
def page_as(browser, live_server) -> Iterator[Callable[..., object]]:
    """Opens a browser tab acting as the given demo user (mock identity, `X-User-Id`), at a
    desktop width unless a `viewport` (see the fixture) is given; with `touch`, a phone's touch
    screen (for `tap()`)."""
    contexts = []

    def open_page(user_id: str, *, viewport: dict[str, int] | None = None, touch: bool = False):
        context = browser.new_context(
            base_url=live_server.url,
            extra_http_headers={"X-User-Id": user_id},
            viewport=viewport or DESKTOP,
            has_touch=touch,
            is_mobile=touch,
        )
        context.set_default_timeout(STEP_TIMEOUT_MS)
        contexts.append(context)
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()


@pytest.fixture
def page(browser, live_server) -> Iterator[object]:
    """A browser tab with no identity header: the page header's user switcher decides."""
    context = browser.new_context(base_url=live_server.url)
    context.set_default_timeout(STEP_TIMEOUT_MS)
    yield context.new_page()
    context.close()


@pytest.fixture
def deployment(settings, tmp_path) -> Iterator[Callable[[str], None]]:
    """Points the live server at a var dir and a deployment config of the test's own (TOML text);
    sandboxes use a fake cgroup root and prlimit, and are closed after the test."""
    from workspace.items.config import DEFAULT_APPS_DIR, forget_loaded_config

    def configure(toml: str) -> None:
        settings.WORKSPACE_VAR_DIR = tmp_path / "var"
        settings.WORKSPACE_CGROUP_ROOT = str(tmp_path / "cgroup")
        settings.WORKSPACE_CGROUP_DRIVER = "prlimit"
        config = tmp_path / "workspace.toml"
        config.write_text(toml)
        settings.WORKSPACE_CONFIG = str(config)
        settings.WORKSPACE_APPS_DIR = str(DEFAULT_APPS_DIR)
        forget_loaded_config()

    yield configure
    forget_loaded_config()


@pytest.fixture
def make_notebook() -> Callable[..., object]:
    """A notebook item of `owner` (its creator), with `files` already in its workspace."""
    from tests.factories import make_item

    def make(title: str = "Notebook", *, owner: str = "bob", files: dict[str, bytes] | None = None) -> object:
        return make_item(title=title, created_by=owner, files=files)

    return make

"""In a real browser: the layout loads, switching user changes who `/me` is, the bell clears."""

from __future__ import annotations

import json

import pytest

from tests.factories import make_notification

pytestmark = pytest.mark.django_db(transaction=True)


def test_home_page_loads_with_header_and_styles(page) -> None:
    page.goto("/")

    assert page.locator("h1").inner_text().startswith("Hello")
    assert page.locator(".site-header").evaluate("el => getComputedStyle(el).position") == "sticky"


def test_switching_user_in_the_header_changes_who_me_is(page) -> None:
    page.goto("/")
    with page.expect_navigation():
        page.select_option("[data-testid=user-switch]", "carol")

    me = json.loads(page.evaluate("() => fetch('/me').then(r => r.text())"))

    assert me["id"] == "carol"
    assert "Carol Nguyen" in page.locator("h1").inner_text()


def test_bell_shows_unread_count_that_clears_after_reading(page_as) -> None:
    first = make_notification(recipient="bob", title="Investigation moved to in progress", kind="status")
    make_notification(recipient="bob", title="Chat shared with you", kind="share")
    tab = page_as("bob")
    tab.goto("/")
    assert tab.get_by_test_id("bell-count").inner_text() == "2"

    tab.get_by_test_id("bell").click()
    tab.locator("[data-testid=notification]", has_text=first.title).get_by_test_id("mark-read").click()
    assert tab.get_by_test_id("bell-count").inner_text() == "1"
    tab.get_by_test_id("read-all").click()

    assert tab.get_by_test_id("bell-count").inner_text() == "0"
    assert tab.locator(".notification.unread").count() == 0

"""In a real browser: the layout loads, switching user changes who `/me` is, the bell clears."""

from __future__ import annotations

import json

import pytest

from tests.e2e.browser import assert_accessible
from tests.factories import make_notification

pytestmark = pytest.mark.django_db(transaction=True)


def test_home_page_loads_with_header_and_styles(page) -> None:
    # Given a browser with no identity header
    # When it opens the home page
    page.goto("/")

    # Then the greeting shows and the stylesheet makes the header sticky
    assert page.locator("h1").inner_text().startswith("Hello")
    assert page.locator(".site-header").evaluate("el => getComputedStyle(el).position") == "sticky"


def test_switching_user_in_the_header_changes_who_me_is(page) -> None:
    # Given a browser on the home page as alice
    page.goto("/")
    # When carol is chosen in the header's user switcher
    with page.expect_navigation():
        page.select_option("[data-testid=user-switch]", "carol")

    # Then /me answers carol from that page, and the page greets her
    me = json.loads(page.evaluate("() => fetch('/me').then(r => r.text())"))

    assert me["id"] == "carol"
    assert "Carol Nguyen" in page.locator("h1").inner_text()


def test_bell_shows_unread_count_that_clears_after_reading(page_as) -> None:
    # Given two unread notifications for bob, and his bell showing two
    first = make_notification(recipient="bob", title="Investigation moved to in progress", kind="status")
    make_notification(recipient="bob", title="Chat shared with you", kind="share")
    tab = page_as("bob")
    tab.goto("/")
    assert tab.get_by_test_id("bell-count").inner_text() == "2"

    # When he opens the bell and marks one read
    tab.get_by_test_id("bell").click()
    tab.locator("[data-testid=notification]", has_text=first.title).get_by_test_id("mark-read").click()
    # Then the count drops to one
    assert tab.get_by_test_id("bell-count").inner_text() == "1"
    # When he marks all read
    tab.get_by_test_id("read-all").click()

    # Then the count is zero and no notification shows as unread
    assert tab.get_by_test_id("bell-count").inner_text() == "0"
    assert tab.locator(".notification.unread").count() == 0


def test_mark_read_buttons_are_named_by_what_they_show(page_as) -> None:
    # Given an unread notification for bob
    make_notification(recipient="bob", title="Chat shared with you", kind="share")
    tab = page_as("bob")

    for path in ("/", "/notifications"):
        # When he opens the home page, then his notifications
        tab.goto(path)

        # Then its Mark read button's accessible name starts with "Mark read" (axe's label-content-name-mismatch)
        assert tab.get_by_test_id("mark-read").first.is_visible()
        assert_accessible(tab)

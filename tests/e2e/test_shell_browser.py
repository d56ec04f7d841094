"""In a real browser, at a desktop width and at 390 px: the home dashboard, notifications (filters,
links that mark read when followed), the site's error pages, My resources, and the header."""

from __future__ import annotations

import re
import time

import pytest

from collab.actor import Actor
from collab.models import Notification
from knowledge import services as knowledge_services
from tests.e2e.browser import assert_accessible, assert_no_sideways_scroll, screenshot
from tests.factories import make_notification
from workspace.investigations import services as investigation_services

pytestmark = pytest.mark.django_db(transaction=True)


def _read_soon(**lookup: str) -> bool:
    """Whether the notification is read within a few seconds: the page that sent the keepalive POST
    has navigated away, so the browser cannot report its answer; the database can."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if Notification.objects.get(**lookup).read:
            return True
        time.sleep(0.05)
    return False


def _looks_right(page, name: str) -> None:
    """What every page here must be: readable to assistive tech, no sideways scroll, and kept for review."""
    assert_no_sideways_scroll(page)
    assert_accessible(page)
    screenshot(page, name)


@pytest.fixture
def bobs_world(make_notebook):
    """bob with two notebooks, an investigation, a chat alice shared with him, and notifications."""
    make_notebook("Capacity planning", owner="bob")
    make_notebook("Scratch with a rather long title that has to wrap on a phone", owner="bob")
    investigation = investigation_services.investigation_create(title="Disk alerts on node 4", actor=Actor("bob"))
    collection = knowledge_services.collection_create(actor=Actor("alice"), name="Operations handbook")
    chat = knowledge_services.chat_create(actor=Actor("alice"), title="Freeing quota", collection_ids=[collection.id])
    knowledge_services.chat_share(chat_id=chat.id, actor=Actor("alice"), user_ids=["bob"])
    Notification.objects.all().delete()
    make_notification(
        recipient="bob",
        kind="share",
        title="Alice Martin shared “Freeing quota” with you",
        link=f"/kb/chats/{chat.id}",
        actor="alice",
    )
    make_notification(
        recipient="bob",
        kind="mention",
        title="Carol Nguyen mentioned you in Disk alerts on node 4",
        body="can you check the disk graphs?",
        link=f"/investigations/{investigation.pk}",
        actor="carol",
    )
    make_notification(recipient="bob", kind="status", title="Disk alerts is now resolved", read=True, actor="carol")
    return {"chat": chat, "investigation": investigation}


def test_home_is_a_dashboard_that_fits_the_screen(page_as, viewport, bobs_world) -> None:
    # Given bob with items, a shared chat and unread notifications
    bob = page_as("bob", viewport=viewport)

    # When he opens the home page
    bob.goto("/")

    # Then the four cards show what is his, and the page is accessible and fits the screen
    assert "Capacity planning" in bob.get_by_test_id("home-items").inner_text()
    assert "Disk alerts on node 4" in bob.get_by_test_id("home-items").inner_text()
    assert "Freeing quota" in bob.get_by_test_id("home-chats").inner_text()
    assert "Sandboxes" in bob.get_by_test_id("home-resources").inner_text()
    assert bob.get_by_test_id("home-unread").get_by_test_id("notification").count() == 2
    _looks_right(bob, "home")


def test_the_phone_header_folds_behind_the_menu_with_chats_in_it(page_as, bobs_world) -> None:
    # Given bob on a phone
    bob = page_as("bob", viewport={"width": 390, "height": 844})
    bob.goto("/")
    assert not bob.get_by_role("link", name="Chats", exact=True).is_visible()

    # When he opens the menu
    bob.get_by_test_id("menu-toggle").click()

    # Then the links show, chats among them, and the header says it is open
    assert bob.get_by_role("link", name="Chats", exact=True).is_visible()
    assert bob.get_by_test_id("menu-toggle").get_attribute("aria-expanded") == "true"
    _looks_right(bob, "header-menu-open")


def test_notifications_filter_by_unread_and_kind(page_as, viewport, bobs_world) -> None:
    # Given bob's two unread notifications and a read one
    bob = page_as("bob", viewport=viewport)
    bob.goto("/notifications")
    assert bob.get_by_test_id("notification").count() == 3

    # When he filters to unread, then to mentions
    bob.get_by_role("link", name="Unread", exact=True).click()
    bob.wait_for_url(re.compile(r"unread=true"))
    assert bob.get_by_test_id("notification").count() == 2
    bob.get_by_role("link", name="Mentions", exact=True).click()
    bob.wait_for_url(re.compile(r"kind=mention"))

    # Then only the unread mention shows, both filters are marked current, and the page fits
    assert bob.get_by_test_id("notification").count() == 1
    assert "mentioned you" in bob.get_by_test_id("notification").inner_text()
    assert bob.locator("a.filter[aria-current=page]").all_inner_texts() == ["Unread", "Mentions"]
    assert bob.locator(".site-nav a[aria-current=page]").get_attribute("href") == "/notifications"
    _looks_right(bob, "notifications-filtered")


def test_following_a_notification_opens_its_target_and_marks_it_read(page_as, bobs_world) -> None:
    # Given bob's unread share notification on his notifications page
    bob = page_as("bob")
    bob.goto("/notifications")
    link = bob.get_by_test_id("notification-link").filter(has_text="shared")
    assert link.get_attribute("href") == f"/kb/chats/{bobs_world['chat'].id}"

    # When he clicks it
    with bob.expect_request(lambda request: request.method == "POST" and request.url.endswith("/read")):
        link.click()
    bob.wait_for_url(f"**/kb/chats/{bobs_world['chat'].id}")

    # Then he is on the chat and the notification is read
    assert _read_soon(title__contains="shared")


def test_middle_clicking_a_notification_opens_a_tab_and_marks_it_read(page_as, bobs_world) -> None:
    # Given bob on his notifications page, two unread
    bob = page_as("bob")
    bob.goto("/notifications")
    link = bob.get_by_test_id("notification-link").filter(has_text="mentioned")

    # When he middle-clicks the mention
    with bob.context.expect_page() as opened, bob.expect_response(lambda r: r.url.endswith("/read")) as marked:
        link.click(button="middle")

    # Then the investigation opens in a new tab, his page stays, and the mention is read there and here
    assert marked.value.status == 200
    opened.value.wait_for_load_state()
    assert opened.value.url.endswith(f"/investigations/{bobs_world['investigation'].pk}")
    assert bob.url.endswith("/notifications")
    assert Notification.objects.get(title__contains="mentioned").read is True
    assert bob.get_by_test_id("bell-count").inner_text() == "1"


def test_following_a_notification_with_the_keyboard_marks_it_read(page_as, bobs_world) -> None:
    # Given bob on his notifications page
    bob = page_as("bob")
    bob.goto("/notifications")

    # When he focuses the mention's link and presses Enter
    bob.get_by_test_id("notification-link").filter(has_text="mentioned").focus()
    with bob.expect_request(lambda request: request.method == "POST" and request.url.endswith("/read")):
        bob.keyboard.press("Enter")
    bob.wait_for_url("**/investigations/*")

    # Then it is read
    assert _read_soon(title__contains="mentioned")


def test_copying_a_notification_link_marks_nothing(page_as, bobs_world) -> None:
    # Given bob on his notifications page
    bob = page_as("bob")
    bob.goto("/notifications")

    # When he only reads the link's address (as "copy link" does) and reloads
    href = bob.get_by_test_id("notification-link").filter(has_text="mentioned").get_attribute("href")
    bob.reload()

    # Then it is the investigation's address, and the notification is still unread
    assert href == f"/investigations/{bobs_world['investigation'].pk}"
    assert Notification.objects.get(title__contains="mentioned").read is False


def test_a_foreign_item_in_the_demo_is_the_sites_404_page(page_as, viewport, settings, make_notebook) -> None:
    # Given the demo's mode (DEBUG on) and carol's notebook
    settings.DEBUG = True
    item = make_notebook("Carol's private notes", owner="carol")
    bob = page_as("bob", viewport=viewport)

    # When bob opens it
    response = bob.goto(f"/a/notebook/items/{item.pk}")

    # Then he gets the site's 404 page with its header, not Django's debug page
    assert response.status == 404
    assert bob.get_by_test_id("error-page").is_visible()
    assert "URLconf" not in bob.content()
    _looks_right(bob, "error-404")


def test_a_path_nothing_serves_in_the_demo_is_the_sites_404_page(page_as, viewport, settings) -> None:
    # Given the demo's mode (DEBUG on)
    settings.DEBUG = True
    bob = page_as("bob", viewport=viewport)

    # When bob opens a long path nothing serves
    response = bob.goto("/a/notebook/items/12345/files/" + "deeply/nested/" * 8 + "missing-file.txt")

    # Then he gets the site's 404 page, which fits the screen however long the path
    assert response.status == 404
    assert "Not found" in bob.locator("h1").inner_text()
    _looks_right(bob, "error-404-long-path")


def test_no_page_asks_for_a_missing_icon(page_as) -> None:
    # Given alice's browser, watching for failed requests
    alice = page_as("alice")
    missing: list[str] = []
    alice.on("response", lambda response: missing.append(response.url) if response.status == 404 else None)

    # When she opens the home page and the notifications page
    alice.goto("/")
    alice.goto("/notifications")

    # Then nothing answered 404, the icon included
    assert missing == []
    assert alice.locator("link[rel=icon]").get_attribute("href") == "/static/favicon.svg"


def test_my_resources_is_accessible_and_fits_the_screen(page_as, viewport, bobs_world) -> None:
    # Given bob with two notebooks
    bob = page_as("bob", viewport=viewport)

    # When he opens My resources
    bob.goto("/my-resources")

    # Then the page is accessible and fits the screen
    assert bob.locator("h1").inner_text() == "My resources"
    _looks_right(bob, "my-resources")


def test_the_skip_link_is_the_first_stop_and_moves_focus_to_the_content(page_as) -> None:
    # Given alice on her home page
    alice = page_as("alice")
    alice.goto("/")

    # When she presses Tab once
    alice.keyboard.press("Tab")

    # Then the skip link is focused, visible, and wears the focus ring
    skip = alice.get_by_role("link", name="Skip to content")
    assert skip.evaluate("el => el === document.activeElement")
    assert skip.evaluate("el => el.getBoundingClientRect().top >= 0")
    assert skip.evaluate("el => getComputedStyle(el).outlineStyle") == "solid"

    # When she follows it with Enter / Then the focus is on the page's content
    alice.keyboard.press("Enter")
    assert alice.evaluate("document.activeElement.id") == "main"


def test_every_control_of_the_header_and_the_notifications_page_has_a_name(page_as) -> None:
    # Given bob with a notification, on his notifications page at a phone's width
    make_notification(recipient="bob", title="Status changed", link="/investigations/1")
    bob = page_as("bob", viewport={"width": 390, "height": 844})
    bob.goto("/notifications")

    # When the buttons, links and form fields are asked for their accessible names
    unnamed = bob.evaluate(
        """() => Array.from(document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea'))
             .filter(el => !(el.getAttribute('aria-label') || el.labels?.length || el.textContent.trim() || el.title))
             .map(el => el.outerHTML.slice(0, 80))"""
    )

    # Then none is unnamed
    assert unnamed == []

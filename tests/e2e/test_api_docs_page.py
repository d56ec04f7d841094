"""The API reference page (`/api/docs`, issue 47 points 10 and 11): it says its language, leads
back to the workspace, groups the items' routes under "items", not the bare "a" of their paths, and
passes axe with its operations closed or open (static/css/api-docs.css, static/js/api-docs.js)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.browser import accessibility_violations, assert_every_action_on_screen, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_api_reference_leads_back_to_the_workspace_and_names_its_first_group_items(page_as, viewport):
    # Given alice in her browser
    page = page_as("alice", viewport=viewport)

    # When she opens the API reference
    page.goto("/api/docs")
    page.wait_for_selector("#swagger-ui .opblock-tag")

    # Then its first group is "items", and the page says its language (axe's html-has-lang)
    assert page.locator("#swagger-ui .opblock-tag").first.inner_text().strip().startswith("items")
    assert page.evaluate("document.documentElement.lang") == "en"
    assert not [violation for violation in accessibility_violations(page) if violation.startswith("html-has-lang")]

    # When she follows the link back / Then she is on the workspace's home page
    page.get_by_test_id("api-docs-back").click()
    page.wait_for_url("**/")
    assert page.locator("main#main").count() == 1


def test_the_api_reference_passes_axe_closed_and_with_an_operation_open(page_as, viewport):
    # Given alice on the API reference, every operation closed
    page = page_as("alice", viewport=viewport)
    page.goto("/api/docs")
    page.wait_for_selector("#swagger-ui .opblock-tag")

    # Then axe finds nothing of any impact, and nothing is out of reach sideways
    assert accessibility_violations(page, every_impact=True) == []
    assert_every_action_on_screen(page)

    # When she opens an operation with a path parameter, a request body and response headers, and tries it out
    operation = page.locator("#operations-items-a_items_create")
    operation.locator(".opblock-summary-control").click()
    operation.locator(".try-out__btn").click()
    expect(operation.get_by_role("textbox", name="Request body")).to_be_visible()

    # Then the address names the open operation, and axe still finds nothing; nothing is cut off
    assert page.url.endswith("#/items/a_items_create")
    assert accessibility_violations(page, every_impact=True) == []
    assert_every_action_on_screen(page)
    screenshot(page, "api-docs-operation-open")

"""The API reference page (`/api/docs`, issue 47 points 10 and 11): it says its language, leads
back to the workspace, and groups the items' routes under "items", not the bare "a" of their paths."""

from __future__ import annotations

import pytest

from tests.e2e.browser import accessibility_violations

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

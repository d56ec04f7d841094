"""Every page of the demo, Django admin included, as staff and as a person without staff rights,
passes axe-core with no violation of any impact (issue 30.9), at a desktop width and on a phone."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from tests.e2e.browser import VIEWPORTS, assert_no_sideways_scroll

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def tasks_run_inline(settings: Any) -> None:
    """The demo's documents are ingested in the request that loads them (no worker here)."""
    settings.TASKS = {
        "default": {**settings.TASKS["default"], "BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}
    }


@pytest.fixture
def demo(settings: Any) -> dict[str, str]:
    """The demo loaded (alice is staff, as `make run` makes her); the paths of one object per page."""
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    call_command("load_demo", stdout=io.StringIO())
    from knowledge.models import Collection, Document, KbChat
    from workspace.investigations.models import Investigation
    from workspace.items.models import Item
    from workspace.workflows.definitions import live_definitions

    collection = Collection.objects.order_by("pk").first()
    document = Document.objects.filter(collection=collection).order_by("pk").first()
    chat = KbChat.objects.filter(created_by="alice").order_by("pk").first()
    notebook = Item.objects.filter(app_slug="notebook", created_by="alice").order_by("pk").first()
    investigation = Investigation.objects.order_by("pk").first()
    workflow = next(iter(live_definitions()))
    return {
        "collection": str(collection.pk),
        "document": str(document.pk),
        "chat": str(chat.pk) if chat else "",
        "notebook": str(notebook.pk),
        "investigation": str(investigation.pk),
        "workflow": workflow.id,
    }


def _pages(ids: dict[str, str]) -> list[str]:
    pages = [
        "/",
        "/my-resources",
        "/me/tokens",
        "/notifications",
        "/kb/collections",
        f"/kb/collections/{ids['collection']}/documents",
        f"/kb/documents/{ids['document']}",
        f"/kb/documents/{ids['document']}/chunks",
        "/kb/chats",
        "/investigations",
        f"/investigations/{ids['investigation']}",
        "/a/notebook/items",
        f"/a/notebook/items/{ids['notebook']}",
        "/workflows",
        "/workflows/new",
        f"/workflows/{ids['workflow']}",
        "/no-such-page",
    ]
    if ids["chat"]:
        pages.append(f"/kb/chats/{ids['chat']}")
    return pages


ADMIN_PAGES = [
    "/admin/",
    "/admin/items/item/",
    "/admin/collab/notification/",
    "/admin/collab/apitoken/",
    "/admin/knowledge/collection/",
    "/admin/knowledge/document/",
    "/admin/knowledge/kbchat/",
    "/admin/knowledge/citationevent/",
    "/admin/quotas/userresourceoverride/",
    "/admin/quotas/userresourceoverride/add/",
    "/admin/quotas/sandboxactivity/",
    "/admin/quotas/workspacediskusage/",
    "/admin/crudgen/storedresource/",
    "/admin/auth/user/",
    "/admin/django_tasks_database/dbtaskresult/",
]


def _all_violations(page: Any) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        f"{page.url}: {violation['id']} ({violation['impact']}) at "
        + ", ".join(" ".join(node["target"]) for node in violation["nodes"][:3])
        for violation in results.response["violations"]
    ]


# Staff at a desktop width, and a person without staff rights on a phone: every page in both
# widths and for both kinds of people, in half the visits of every pair.
@pytest.mark.parametrize(("user_id", "width"), [("alice", "desktop"), ("bob", "phone")])
def test_every_page_passes_axe_and_fits_the_screen(page_as, demo, user_id: str, width: str) -> None:
    # Given the demo, and alice (staff) at a desktop width or bob (not staff) on a phone
    tab = page_as(user_id, viewport=VIEWPORTS[width])
    found: list[str] = []
    # When each page a person reaches from the menu is opened
    for path in _pages(demo):
        tab.goto(path)
        found += _all_violations(tab)
        assert_no_sideways_scroll(tab)
    # Then axe finds nothing on any of them
    assert not found, "\n".join(found)


def test_every_admin_page_passes_axe(page, demo) -> None:
    # Given staff signed in to Django admin with the demo's password
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "demo")
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    found: list[str] = []
    # When each admin page is opened, and the change form of the first row of each list
    for path in ADMIN_PAGES:
        page.goto(path)
        found += _all_violations(page)
        first_row = page.locator("#result_list tbody th a").first
        if path.count("/") == 4 and first_row.count():
            page.goto(first_row.get_attribute("href"))
            found += _all_violations(page)
    # Then axe finds nothing on any of them
    assert not found, "\n".join(found)

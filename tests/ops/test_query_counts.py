"""The pages people poll do a fixed number of queries, however much data they show."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from collab import clock
from quotas.models import SandboxActivity, UserResourceOverride, WorkspaceDiskUsage
from workspace.items.models import Item

pytestmark = pytest.mark.django_db


def _queries(call: Callable[[], object]) -> int:
    with CaptureQueriesContext(connection) as captured:
        call()
    return len(captured)


def _alices_items(make_item, count: int, *, start: int) -> None:
    """`count` items of alice, each with a live sandbox row and a measured disk row."""
    now = clock.now()
    for number in range(start, start + count):
        item: Item = make_item(title=f"Item {number}")
        SandboxActivity.objects.create(
            item_id=str(item.pk), app_slug="notebook", owner="alice", backend="local",
            backend_sandbox_id=f"sb-{item.pk}", cpu_cores=1.0, memory_bytes=2**29,
            last_seen_at=now, lease_expires_at=now + timedelta(minutes=5),
        )  # fmt: skip
        WorkspaceDiskUsage.objects.create(item_id=str(item.pk), app_slug="notebook", owner="alice", bytes=1024)


@pytest.mark.parametrize("path", ["/me/resources", "/my-resources"])
def test_my_resources_costs_the_same_queries_for_two_items_as_for_twenty(
    path, per_user, alice_api, make_item, django_assert_max_num_queries
):
    # Given per-user limits and two items with live sandboxes and disk rows
    per_user(count=50, cpu=100, memory="100G", disk="100G")
    _alices_items(make_item, 2, start=0)
    small = _queries(lambda: alice_api.get(path, HTTP_ACCEPT="text/html" if path == "/my-resources" else "*/*"))

    # When eighteen more are added
    _alices_items(make_item, 18, start=2)

    # Then the page takes no more queries than with two
    with django_assert_max_num_queries(small):
        response = alice_api.get(path, HTTP_ACCEPT="text/html" if path == "/my-resources" else "*/*")
    assert response.status_code == 200
    assert "Item 19" in response.content.decode()


def test_the_staff_override_list_costs_the_same_queries_for_any_number_of_overrides(
    write_config, api_client_for, settings, django_assert_max_num_queries
):
    # Given staff and two overrides
    write_config('[sandbox]\nworkspace_quota = "1G"\n')
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    staff = api_client_for("alice")
    for user_id in ("bob", "carol"):
        UserResourceOverride.objects.create(user_id=user_id, count=3)
    small = _queries(lambda: staff.get("/admin/user-resources"))

    # When thirty more people get overrides
    UserResourceOverride.objects.bulk_create(UserResourceOverride(user_id=f"user{n}", count=2) for n in range(30))

    # Then the list takes no more queries
    with django_assert_max_num_queries(small):
        response = staff.get("/admin/user-resources")
    assert len(response.json()["overrides"]) == 32


def test_a_kb_chat_costs_the_same_queries_for_any_number_of_messages(
    handbook, make_chat, ask, alice_api, django_assert_max_num_queries
):
    # Given a chat with one answered question
    chat = make_chat(handbook)
    assert ask(chat.id, "What happens when a quota is hit?").status_code == 201
    small = _queries(lambda: alice_api.get(f"/kb/chats/{chat.id}"))

    # When five more questions are answered, with their citations
    for number in range(5):
        assert ask(chat.id, f"How do I share a chat? ({number})").status_code == 201

    # Then reading the chat takes no more queries
    with django_assert_max_num_queries(small):
        response = alice_api.get(f"/kb/chats/{chat.id}")
    assert len(response.json()["messages"]) == 12

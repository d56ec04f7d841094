"""The home page is a dashboard: my items, chats shared with me, my resources, unread notifications."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client

from collab import clock
from collab.actor import Actor
from knowledge import services as knowledge_services
from quotas.models import SandboxActivity, WorkspaceDiskUsage
from tests.factories import make_notification
from workspace.items import services as item_services

pytestmark = pytest.mark.django_db

HTML = {"HTTP_ACCEPT": "text/html,application/xhtml+xml,*/*;q=0.8"}


def _section(response, testid: str) -> str:
    """The HTML of one dashboard card, so a check cannot pass on another card's text."""
    html = response.content.decode()
    start = html.index(f'data-testid="{testid}"')
    return html[start : html.index("</section>", start)]


def test_home_lists_my_items_of_every_app_newest_first_linking_each(client: Client, make_item) -> None:
    # Given alice's notebook, then her investigation item, and bob's notebook
    notebook = make_item(title="Capacity notebook", created_by="alice")
    make_item(app_slug="rca", title="Disk alerts", created_by="alice")
    make_item(title="Bob's scratch", created_by="bob")

    # When she opens the home page
    card = _section(client.get("/", **HTML), "home-items")

    # Then her two items show, newest first, each with its app and a link; bob's does not
    assert card.index("Disk alerts") < card.index("Capacity notebook")
    assert f'href="/a/notebook/items/{notebook.pk}"' in card
    assert "Investigations" in card
    assert "Bob&#x27;s scratch" not in card


def test_an_investigation_on_home_links_to_its_investigation_page(client: Client, make_investigation) -> None:
    # Given alice's investigation
    investigation = make_investigation(title="Disk alerts on node 4")

    # When she opens the home page
    card = _section(client.get("/", **HTML), "home-items")

    # Then it links to the investigation, not to the bare item page
    assert f'href="/investigations/{investigation.pk}"' in card


def test_home_lists_chats_others_shared_with_me_but_not_my_own(
    client: Client, make_collection, make_chat, django_capture_on_commit_callbacks
) -> None:
    # Given bob's chat shared with alice, and alice's own chat
    collection = make_collection()
    shared = make_chat(collection, owner="bob", title="Freeing quota")
    with django_capture_on_commit_callbacks(execute=True):
        knowledge_services.chat_share(chat_id=shared.pk, actor=Actor("bob"), user_ids=["alice"])
    make_chat(collection, owner="alice", title="My own questions")

    # When alice opens the home page
    card = _section(client.get("/", **HTML), "home-chats")

    # Then bob's chat shows with its owner and a link; her own does not
    assert "Freeing quota" in card
    assert "from Bob" in card
    assert f'href="/kb/chats/{shared.pk}"' in card
    assert "My own questions" not in card


def test_home_sums_up_my_resources_against_my_limits(client: Client, per_user, make_item) -> None:
    # Given alice limited to 3 sandboxes and 2G of disk, with one live sandbox and 512M measured
    per_user(count=3, disk="2G")
    item = make_item(created_by="alice")
    SandboxActivity.objects.create(
        item_id=str(item.pk),
        app_slug="notebook",
        owner="alice",
        backend="local",
        lease_expires_at=clock.now() + timedelta(seconds=60),
    )
    WorkspaceDiskUsage.objects.create(item_id=str(item.pk), app_slug="notebook", owner="alice", bytes=512 * 1024**2)

    # When she opens the home page
    card = _section(client.get("/", **HTML), "home-resources")

    # Then the card reads 1 of 3 sandboxes and 512 MB of 2 GB disk
    assert '<dt>Sandboxes</dt>\n          <dd>1 <span class="meta">of 3</span>' in card
    assert '512 MB <span class="meta">of 2 GB</span>' in card


def test_home_shows_only_unread_notifications_with_the_unread_total(client: Client) -> None:
    # Given alice's six unread notifications and a read one
    for number in range(6):
        make_notification(title=f"unread {number}")
    make_notification(title="already read", read=True)

    # When she opens the home page
    card = _section(client.get("/", **HTML), "home-unread")

    # Then five unread ones show, none read, and the link counts all six
    assert card.count('data-testid="notification"') == 5
    assert "already read" not in card
    assert "All unread (<span data-unread-count>6</span>)" in card


def test_an_empty_home_says_what_to_do_in_each_card(client: Client) -> None:
    # Given alice with nothing yet
    # When she opens the home page
    response = client.get("/", **HTML)

    # Then each card says so plainly
    assert "You are all caught up." in _section(response, "home-unread")
    assert "You have no items yet." in _section(response, "home-items")
    assert "No one has shared a chat with you yet." in _section(response, "home-chats")


def test_home_costs_the_same_queries_however_much_a_person_holds(
    client: Client, make_item, make_collection, make_chat, django_assert_max_num_queries
) -> None:
    # Given alice with 40 items, 20 chats shared with her, 60 notifications, 10 bills she is asked
    # to pay and 10 answers to her own handovers
    collection = make_collection()
    for number in range(40):
        mine = make_item(title=f"item {number}", created_by="alice")
        if number < 10:
            item_services.item_update(item=mine, actor=Actor("alice"), payer="carol")
            item_services.item_handover_answer(item_id=mine.pk, actor=Actor("carol"), accept=number % 2 == 0)
            theirs = make_item(title=f"bob's {number}", created_by="bob")
            item_services.item_update(item=theirs, actor=Actor("bob"), payer="alice")
    for number in range(20):
        chat = make_chat(collection, owner="bob", title=f"chat {number}")
        knowledge_services.chat_share(chat_id=chat.pk, actor=Actor("bob"), user_ids=["alice"])
    for number in range(60):
        make_notification(title=f"note {number}", read=number % 2 == 0)

    # When she opens the home page / Then a bounded handful of queries serve it
    with django_assert_max_num_queries(13):
        response = client.get("/", **HTML)
    assert response.status_code == 200

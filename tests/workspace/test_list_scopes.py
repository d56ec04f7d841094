"""Every selector of a list, asked by a stranger: none of alice's rows appear (docs/ARCHITECTURE.md §3).

`LISTS` names each selector that lists rows for someone, with what it answers dave and how to
read row ids out of it; a guard test fails when a selector module grows a list that is not here,
so a new list cannot skip its access module's scope.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from collab import selectors as collab_selectors
from collab import tokens
from collab.actor import Actor
from collab.errors import NotFound
from knowledge import selectors as knowledge_selectors
from quotas import selectors as quota_selectors
from quotas.models import WorkspaceDiskUsage
from tests.factories import make_chat, make_collection, make_investigation, make_item, make_notification, make_workflow
from workspace import home
from workspace.investigations import selectors as investigation_selectors
from workspace.items import selectors as item_selectors
from workspace.workflows import definitions
from workspace.workflows import selectors as workflow_selectors

pytestmark = pytest.mark.django_db

DAVE = Actor("dave")


@dataclass(frozen=True)
class Alices:
    """One row of each kind that alice made, by the id a list shows it under."""

    item: str
    investigation: str
    workflow: str
    chat: str
    notification: str
    token: str

    def ids(self) -> set[str]:
        return {self.item, self.investigation, self.workflow, self.chat, self.notification, self.token}


@pytest.fixture
def alices() -> Alices:
    item = make_item(created_by="alice")
    investigation = make_investigation(owner="alice", members=("bob",))
    chat = make_chat(make_collection(user_id="alice"), owner="alice")
    WorkspaceDiskUsage.objects.create(item_id=str(item.pk), app_slug="notebook", owner="alice", bytes=4096)
    return Alices(
        item=str(item.pk),
        investigation=str(investigation.pk),
        workflow=make_workflow(["true"], user="alice", item_id=str(item.pk)),
        chat=str(chat.pk),
        notification=str(make_notification(recipient="alice").pk),
        token=str(tokens.token_create(actor=Actor("alice"), name="ci").row.pk),
    )


def _ids(rows: Iterable[Any], *fields: str) -> set[str]:
    found: set[str] = set()
    for row in rows:
        for field in fields:
            value = row.get(field) if isinstance(row, dict) else getattr(row, field, None)
            if value is not None:
                found.add(str(value))
    return found


# The selectors of a list: name -> what it lists for dave, as the ids a list shows.
LISTS: dict[str, Callable[[], set[str]]] = {
    "items.items_of_app": lambda: _ids(item_selectors.items_of_app(app_slug="notebook", actor=DAVE).results, "pk"),
    "items.items_of_creator": lambda: _ids(item_selectors.items_of_creator(user_id="dave", limit=50), "pk"),
    "items.handover_news": lambda: _ids(
        item_selectors.handover_news(user_id="dave", since=datetime(2000, 1, 1, tzinfo=UTC), limit=50), "item_id"
    ),
    "items.pending_handovers": lambda: _ids(item_selectors.pending_handovers(user_id="dave"), "item_id"),
    "items.paid_for_others": lambda: _ids(item_selectors.paid_for_others(user_id="dave"), "item_id"),
    "workflows.definitions_page": lambda: _ids(definitions.definitions_page(actor=DAVE).definitions, "id"),
    "workflows.definitions_page(deleted)": lambda: _ids(
        definitions.definitions_page(actor=DAVE, deleted=True).definitions, "id"
    ),
    "workflows.recent_definitions": lambda: _ids(definitions.recent_definitions(actor=DAVE), "id"),
    "workflows.item_choices": lambda: {
        choice.value for group in workflow_selectors.item_choices(actor=DAVE) for choice in group.choices
    },
    "investigations.investigations_for_user": lambda: _ids(
        investigation_selectors.investigations_for_user(actor=DAVE), "pk"
    ),
    "knowledge.chats_for_reader": lambda: _ids(knowledge_selectors.chats_for_reader(actor=DAVE), "id"),
    "knowledge.chats_shared_with": lambda: _ids(knowledge_selectors.chats_shared_with(user_id="dave", limit=50), "pk"),
    "collab.inbox": lambda: _ids(collab_selectors.inbox(user_id="dave").results, "id"),
    "collab.tokens_of": lambda: _ids(tokens.tokens_of(actor=Actor("dave")), "pk"),
    "quotas.my_resources": lambda: _ids(
        [*quota_selectors.my_resources(actor=DAVE).live, *quota_selectors.my_resources(actor=DAVE).disk], "item"
    ),
}

# Selectors that take a person but list nothing of others': counts, one person's own figures, and
# lookups of ids the caller names (filtered by the items' access module). The team's knowledge
# library (`collections_with_counts`) is read by everyone signed in, by design; a workflow's runs
# are listed once its definition was read for the caller.
NOT_LISTS = {
    "collab.inbox_state",
    "collab.unread_count",
    # The viewer's own latest mention that links to one page, and a count of what waits for them.
    "collab.mention_leading_to",
    "items.pending_handover_count",
    "quotas.resources_at_a_glance",
    "quotas.payer_sandbox_usage",
    "quotas.payer_sandbox_usage_sent",
    "quotas.payer_disk_bytes",
    "quotas.payer_live_sandbox_exists",
    "quotas.override_of_user",
    "workflows.items_for_viewer",
    "workflows.revision_comparison",
    # One workflow, or its revisions, through the workflow's access policy: a stranger gets 404.
    "workflows.workflow_caller",
    "workflows.workflow_scope",
    "workflows.workflow_definition",
    "workflows.workflow_for",
    "workflows.revisions_page",
    "workflows.revision_for",
}
MODULES = [
    ("items", item_selectors),
    ("workflows", workflow_selectors),
    ("workflows", definitions),
    ("investigations", investigation_selectors),
    ("knowledge", knowledge_selectors),
    ("collab", collab_selectors),
    ("quotas", quota_selectors),
]


@pytest.mark.parametrize("name", sorted(LISTS))
def test_a_strangers_list_never_holds_alices_rows(alices: Alices, name: str) -> None:
    # Given one row of every kind made by alice (bob is her investigation's member)
    # When dave, who was given nothing, asks this list
    listed = LISTS[name]()
    # Then none of alice's rows is in it
    assert not listed & alices.ids(), f"{name} shows dave {listed & alices.ids()}"


def test_the_same_lists_show_alice_her_own_rows(alices: Alices) -> None:
    # Given alice's rows
    alice = Actor("alice")
    # When she asks the main lists
    # Then each holds her row, so the stranger test above is not passing on empty lists
    assert alices.item in _ids(item_selectors.items_of_app(app_slug="notebook", actor=alice).results, "pk")
    assert alices.workflow in _ids(definitions.definitions_page(actor=alice).definitions, "id")
    assert alices.investigation in _ids(investigation_selectors.investigations_for_user(actor=alice), "pk")
    assert alices.chat in _ids(knowledge_selectors.chats_for_reader(actor=alice), "id")
    assert alices.item in _ids(quota_selectors.my_resources(actor=alice).disk, "item")


def test_the_home_dashboard_shows_a_stranger_nothing_of_alices(alices: Alices) -> None:
    # Given alice's rows
    # When dave opens his home page
    dashboard = home.home_dashboard(user_id="dave")
    # Then its lists (built from the selectors above) are empty
    assert (dashboard.items, dashboard.shared_chats, dashboard.unread.results) == ([], [], [])


def test_a_stranger_cannot_list_the_revisions_of_alices_workflow(alices: Alices) -> None:
    # Given alice's workflow
    # When dave asks for its revisions
    # Then he is refused as for a workflow that does not exist
    with pytest.raises(NotFound) as refused:
        definitions.revisions_page(alices.workflow, actor=DAVE)
    assert refused.value.error == "workflow_not_found"
    assert refused.value.detail == f"There is no workflow {alices.workflow}."


def test_every_list_selector_is_in_the_table() -> None:
    # Given the selector modules' public functions that take a person (an actor, a user id, a payer or creator)
    people = {"actor", "user_id", "owner", "payer", "creator"}
    found = {
        f"{label}.{name}"
        for label, module in MODULES
        for name, function in inspect.getmembers(module, inspect.isfunction)
        if function.__module__ == module.__name__
        and not name.startswith("_")
        and people & set(inspect.signature(function).parameters)
    }
    # When they are compared with the lists above
    listed = {name.split("(")[0] for name in LISTS} | NOT_LISTS
    # Then each is either a list this test scopes or named as not a list
    assert found <= listed, f"list selectors missing from LISTS: {sorted(found - listed)}"

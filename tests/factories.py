"""Factories for test data, in one place: each returns a saved row with sensible defaults, made
through the services where one exists. Fixtures of the same names (tests/fixtures/) hand them to
tests that also need the database."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count
from typing import Any

from collab import clock
from collab.actor import Actor
from collab.models import Notification
from knowledge import services as knowledge_services
from knowledge.models import Collection, KbChat
from workspace.investigations import services as investigation_services
from workspace.investigations.models import Investigation
from workspace.items.models import Item
from workspace.sandboxes.filestore import workspace_dir
from workspace.workflows.generated import workflows

_sequence = count(1)


def make_notification(**overrides: Any) -> Notification:
    number = next(_sequence)
    moment = overrides.pop("created_at", None) or clock.now()
    fields: dict[str, Any] = {
        "recipient": "alice",
        "kind": Notification.Kind.MENTION,
        "title": f"Notification {number}",
        "body": "",
        "link": "",
        "actor": "bob",
        "read": False,
        "created_at": moment,
        "updated_at": moment,
    }
    fields.update(overrides)
    return Notification.objects.create(**fields)


def make_item(
    *,
    app_slug: str = "notebook",
    title: str = "Scratch",
    created_by: str = "alice",
    owner: str = "",
    files: dict[str, bytes] | None = None,
) -> Item:
    """An item of `created_by` (who pays unless `owner` says), its workspace holding `files`."""
    item = Item(app_slug=app_slug, title=title, owner=owner or created_by)
    item.stamp_created(created_by)
    item.save()
    root = workspace_dir(item.pk)
    root.mkdir(parents=True, exist_ok=True)
    for path, data in (files or {}).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return item


def make_collection(
    name: str = "Handbook", *, user_id: str = "alice", description: str = "", writers: Sequence[str] = ()
) -> Collection:
    collection = knowledge_services.collection_create(actor=Actor(user_id), name=name, description=description)
    if writers:
        knowledge_services.collection_writers_add(
            collection_id=collection.id, actor=Actor(user_id), user_ids=list(writers)
        )
    return collection


def make_chat(collection: Collection, *, owner: str = "alice", title: str = "Questions") -> KbChat:
    return knowledge_services.chat_create(actor=Actor(owner), title=title, collection_ids=[collection.id])


def make_investigation(
    *, title: str = "Disk alerts on node 4", owner: str = "alice", members: tuple[str, ...] = ()
) -> Investigation:
    return investigation_services.investigation_create(title=title, actor=Actor(owner), members=list(members))


def make_workflow(steps: list[str], *, name: str = "checks", user: str = "alice", **fields: object) -> str:
    """Stores a workflow definition as `user` would through /api/v1/workflow; returns its id."""
    return workflows.create({"name": name, "steps": steps, **fields}, user=user)["resource_id"]

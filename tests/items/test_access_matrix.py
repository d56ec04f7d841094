"""The access matrix of issue 12.8: for every endpoint family, someone without a relation to the
object gets 404 (or the 403 the contract names) and nothing changes; the person it belongs to
gets through, so each row is known to name a real route.

alice owns everything here (not staff); bob is a member of her investigation; carol pays for her
notebook; dave reads her shared knowledge-base chat; staff is made explicit per test.

The payer's column (docs/ARCHITECTURE.md §5, `workspace.items.access.ItemRight.TEND`): carol sees the
notebook's title, disk, sandbox and file list, deletes and shrinks its files and closes its
sandbox (rows marked `payer`); everything else of it is 403 `payer_only` for her, never a 404,
since My resources names the item to her.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from collab import tokens
from collab.actor import Actor
from collab.models import ApiToken, Notification
from crudgen.models import StoredResource
from knowledge import services as kb
from knowledge.models import Document, KbChatMessage, KbChatShare
from quotas.models import SandboxActivity
from tests.factories import make_notification
from workspace.agent.models import ItemMessage
from workspace.investigations.models import Investigation, InvestigationMember
from workspace.investigations.services import investigation_create
from workspace.items import services as ws
from workspace.items.models import Item
from workspace.sandboxes.filestore import workspace_dir
from workspace.workflows.generated import workflows
from workspace.workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class World:
    notebook: Item
    investigation: Item
    workflow_id: str
    collection_id: str
    document_id: str
    chat_id: str
    token_id: int
    notification_id: int


@pytest.fixture
def world(api_client_for) -> World:
    notebook = Item(app_slug="notebook", title="Alice's notebook", owner="alice")
    notebook.stamp_created("alice")
    notebook.save()
    workspace_dir(notebook.pk).mkdir(parents=True, exist_ok=True)
    (workspace_dir(notebook.pk) / "secret.txt").write_text("alice only")
    ws.item_update(item=notebook, actor=Actor("alice"), payer="carol")
    ws.item_handover_answer(item_id=notebook.pk, actor=Actor("carol"), accept=True)
    investigation = investigation_create(title="Outage", actor=Actor("alice"), members=["bob"]).item
    collection = kb.collection_create(actor=Actor("alice"), name="Runbooks")
    document = kb.document_upload(
        collection_id=collection.id, actor=Actor("alice"), filename="a.md", content_type="text/markdown", data=b"# A\n"
    )
    chat = kb.chat_create(actor=Actor("alice"), title="Questions", collection_ids=[collection.id])
    KbChatShare.objects.create(chat=chat, user_id="dave")
    return World(
        notebook=notebook,
        investigation=investigation,
        workflow_id=workflows.create({"name": "nightly", "steps": ["true"]}, user="alice")["resource_id"],
        collection_id=collection.id,
        document_id=document.id,
        chat_id=chat.id,
        token_id=tokens.token_create(actor=Actor("alice"), name="alice's script").row.pk,
        notification_id=make_notification(recipient="alice").pk,
    )


def _snapshot(world: World) -> tuple:
    """Everything a refused request could have changed."""
    return (
        list(Item.objects.order_by("pk").values_list("title", "owner", "pending_owner", "updated_at")),
        sorted(path.name for path in workspace_dir(world.notebook.pk).iterdir()),
        (workspace_dir(world.notebook.pk) / "secret.txt").read_text(),
        SandboxActivity.objects.count(),
        ItemMessage.objects.count(),
        WorkflowRun.objects.count(),
        list(Investigation.objects.values_list("status", flat=True)),
        sorted(InvestigationMember.objects.values_list("user_id", flat=True)),
        list(StoredResource.objects.values_list("current_revision_id", "is_deleted", "data")),
        list(Document.objects.values_list("filename", "content_version")),
        KbChatMessage.objects.count(),
        list(KbChatShare.objects.values_list("user_id", flat=True)),
        list(ApiToken.objects.values_list("revoked_at", flat=True)),
        list(Notification.objects.values_list("read", flat=True)),
    )


@dataclass(frozen=True)
class Row:
    family: str
    method: str
    path: str
    body: Any
    refused: dict[str, int]  # who is refused, with the status they get
    allowed: str  # who gets through (the positive control)
    payer: bool = False  # carol, who pays for the notebook, gets through too


ITEM = "/a/notebook/items/{notebook}"
INV = "/investigations/{investigation}"
STRANGERS_OF_NOTEBOOK = {"bob": 404, "dave": 404}
# What only those who may use the notebook do: its payer knows it exists, and is told why not.
USERS_OF_NOTEBOOK = {**STRANGERS_OF_NOTEBOOK, "carol": 403}
ROWS = [
    Row("item", "get", ITEM, None, STRANGERS_OF_NOTEBOOK, "alice", payer=True),
    Row("item", "patch", ITEM, {"title": "taken"}, USERS_OF_NOTEBOOK, "alice"),
    Row("exec", "post", ITEM + "/exec", {"command": "rm secret.txt"}, USERS_OF_NOTEBOOK, "alice"),
    Row("exec", "get", ITEM + "/execs", None, USERS_OF_NOTEBOOK, "alice"),
    Row("files", "get", ITEM + "/files", None, STRANGERS_OF_NOTEBOOK, "alice", payer=True),
    Row("files", "get", ITEM + "/files/secret.txt", None, USERS_OF_NOTEBOOK, "alice"),
    Row("files", "put", ITEM + "/files/secret.txt", "", USERS_OF_NOTEBOOK, "alice"),
    Row("files", "delete", ITEM + "/files/secret.txt", None, STRANGERS_OF_NOTEBOOK, "alice", payer=True),
    Row(
        "files",
        "post",
        ITEM + "/files:truncate",
        {"path": "secret.txt", "size": 0},
        STRANGERS_OF_NOTEBOOK,
        "alice",
        payer=True,
    ),
    Row(
        "files",
        "post",
        ITEM + "/files:move",
        {"source": "secret.txt", "target": "x.txt"},
        USERS_OF_NOTEBOOK,
        "alice",
    ),
    Row("files", "post", ITEM + "/files:mkdir", {"path": "planted"}, USERS_OF_NOTEBOOK, "alice"),
    Row(
        "files",
        "post",
        ITEM + "/files:batch",
        {"operations": [{"op": "stage", "path": "in.txt", "content": "x"}]},
        USERS_OF_NOTEBOOK,
        "alice",
    ),
    Row("sandbox", "get", ITEM + "/sandbox", None, STRANGERS_OF_NOTEBOOK, "alice", payer=True),
    Row("sandbox", "delete", ITEM + "/sandbox", None, STRANGERS_OF_NOTEBOOK, "alice", payer=True),
    Row("chat", "get", ITEM + "/messages", None, USERS_OF_NOTEBOOK, "alice"),
    Row("chat", "post", ITEM + "/messages", {"content": "$ rm secret.txt"}, USERS_OF_NOTEBOOK, "alice"),
    Row("workflow runs", "get", ITEM + "/workflows/{workflow}", None, USERS_OF_NOTEBOOK, "alice"),
    Row("workflow runs", "post", ITEM + "/workflows/{workflow}/run", None, USERS_OF_NOTEBOOK, "alice"),
    Row("/api/v1", "get", "/api/v1/workflow/{workflow}/full", None, {"bob": 404, "dave": 404}, "alice"),
    Row(
        "/api/v1", "put", "/api/v1/workflow/{workflow}", {"name": "x", "steps": []}, {"bob": 404, "dave": 404}, "alice"
    ),
    Row("/api/v1", "delete", "/api/v1/workflow/{workflow}", None, {"bob": 404, "dave": 404}, "alice"),
    Row("investigation", "get", INV, None, {"carol": 404, "dave": 404}, "bob"),
    Row("investigation", "post", INV + "/status", {"status": "closed"}, {"carol": 404, "dave": 404}, "bob"),
    Row("investigation", "post", INV + "/mentions", {"user_ids": ["carol"]}, {"carol": 404, "dave": 404}, "bob"),
    Row(
        "investigation",
        "post",
        INV + "/members",
        {"user_ids": ["dave"]},
        {"bob": 403, "carol": 404, "dave": 404},
        "alice",
    ),
    Row("kb chat", "get", "/kb/chats/{chat}", None, {"bob": 404, "carol": 404}, "dave"),
    Row("kb chat", "post", "/kb/chats/{chat}/messages", {"content": "Why?"}, {"bob": 404, "dave": 403}, "alice"),
    Row("kb chat", "post", "/kb/chats/{chat}/share", {"user_ids": ["bob"]}, {"bob": 404, "dave": 403}, "alice"),
    Row("kb documents", "patch", "/kb/documents/{document}", {"filename": "b.md"}, {"bob": 403, "dave": 403}, "alice"),
    Row("kb documents", "delete", "/kb/documents/{document}", None, {"bob": 403, "dave": 403}, "alice"),
    Row("kb writers", "post", "/kb/collections/{collection}/writers", {"user_ids": ["bob"]}, {"bob": 403}, "alice"),
    Row("my resources", "delete", "/me/resources/live/{notebook}", None, {"bob": 404, "dave": 404}, "carol"),
    Row("handover", "post", "/me/resources/handovers/{notebook}/return", None, {"bob": 404, "dave": 404}, "carol"),
    Row("tokens", "delete", "/me/tokens/{token}", None, {"bob": 404, "dave": 404}, "alice"),
    Row("notifications", "post", "/notifications/{notification}/read", None, {"bob": 404, "dave": 404}, "alice"),
]
REFUSALS = [(row, who, status) for row in ROWS for who, status in row.refused.items()]


def _call(client: APIClient, row: Row, world: World) -> Any:
    path = row.path.format(
        notebook=world.notebook.pk,
        investigation=world.investigation.pk,
        workflow=world.workflow_id,
        collection=world.collection_id,
        document=world.document_id,
        chat=world.chat_id,
        token=world.token_id,
        notification=world.notification_id,
    )
    if row.body is None:
        return getattr(client, row.method)(path)
    if isinstance(row.body, str):
        return getattr(client, row.method)(path, row.body, content_type="application/octet-stream")
    return getattr(client, row.method)(path, row.body, format="json")


@pytest.mark.parametrize(
    ("row", "who", "status"), REFUSALS, ids=[f"{r.family}-{r.method}-{r.path}-{who}" for r, who, _ in REFUSALS]
)
def test_someone_without_the_right_is_refused_and_nothing_changes(world, api_client_for, row, who, status):
    # Given alice's world, and someone with no right to this object
    before = _snapshot(world)
    # When they use the endpoint
    response = _call(api_client_for(who), row, world)
    # Then they get the contract's refusal with an error code, and nothing changed
    assert response.status_code == status, response.content[:300]
    assert response.json()["error"]
    assert _snapshot(world) == before


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.family}-{r.method}-{r.path}" for r in ROWS])
def test_the_person_with_the_right_gets_through(world, api_client_for, row):
    # Given alice's world (with a live notebook sandbox where the row needs one)
    _with_live_sandbox(row, world, api_client_for)
    # When the person with the right uses the endpoint
    response = _call(api_client_for(row.allowed), row, world)
    # Then it is not refused (so each refusal above is about the right, not a wrong path)
    assert response.status_code < 400, response.content[:300]


def _with_live_sandbox(row: Row, world: World, api_client_for) -> None:
    if row.family in {"my resources", "sandbox"}:
        api_client_for("alice").post(f"/a/notebook/items/{world.notebook.pk}/exec", {"command": "true"}, format="json")


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r.payer], ids=[f"{r.family}-{r.method}-{r.path}" for r in ROWS if r.payer]
)
def test_the_payer_gets_through_where_the_payer_may(world, api_client_for, row):
    # Given alice's notebook that carol pays for (with a live sandbox where the row needs one)
    _with_live_sandbox(row, world, api_client_for)
    # When carol uses the endpoint
    response = _call(api_client_for("carol"), row, world)
    # Then she gets through: she frees the notebook's disk and closes its sandbox
    assert response.status_code < 400, response.content[:300]


def test_the_payer_is_told_what_they_may_do_where_they_may_not(world, api_client_for):
    # Given alice's notebook that carol pays for
    # When carol tries to run a command in it
    response = _call(api_client_for("carol"), ROWS[2], world)
    # Then the refusal names the creator and what the payer may do instead
    assert response.json()["error"] == "payer_only"
    assert "alice" in response.json()["detail"]
    assert "delete or shrink" in response.json()["detail"]


@pytest.mark.parametrize("row", [r for r in ROWS if r.family in {"item", "files", "/api/v1", "workflow runs"}])
def test_staff_get_through_where_staff_may(settings, world, api_client_for, row):
    # Given dave made staff
    settings.WORKSPACE_MOCK_STAFF = ["dave"]
    # When he uses an endpoint of alice's notebook or workflow
    response = _call(api_client_for("dave"), row, world)
    # Then he gets through
    assert response.status_code < 400, response.content[:300]

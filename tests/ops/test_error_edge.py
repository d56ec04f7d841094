"""Domain errors (collab.errors) carry no HTTP; one mapping at the edge (collab.edge) turns each kind
into the API's JSON with its status and headers, the site's page, a message in admin and a task's
failure line. Business code raises them whoever calls it: a page, a task, a command."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.contrib import admin, messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.db import DataError
from django.http import Http404
from django.test import RequestFactory
from rest_framework.exceptions import APIException

from collab import errors
from collab.actor import Actor
from collab.edge import STATUS_BY_KIND, admin_refused, body_of, failure_line, form_error, refusal_body, status_of
from collab.errors import DomainError, Forbidden, Invalid, NotFound, QuotaExceeded, Unavailable
from knowledge import ingest
from knowledge import services as knowledge_services
from workspace.items import services as item_services
from workspace.items.access import app_or_404
from workspace.items.admin import ItemAdmin
from workspace.items.models import Item
from workspace.sandboxes import filestore
from workspace.worker import WorkerIdentity, drain
from workspace.workflows import services as workflow_services

pytestmark = pytest.mark.django_db

HTML = {"HTTP_ACCEPT": "text/html,application/xhtml+xml,*/*;q=0.8"}
JSON = {"HTTP_ACCEPT": "application/json"}

# Every kind and the status the API has always answered it with (docs/ARCHITECTURE.md "Errors").
KINDS = [
    ("Invalid", 400),
    ("NotAuthenticated", 401),
    ("Forbidden", 403),
    ("NotFound", 404),
    ("Conflict", 409),
    ("Gone", 410),
    ("TooLarge", 413),
    ("UnsupportedType", 415),
    ("Unprocessable", 422),
    ("UpgradeRequired", 426),
    ("TooManyRequests", 429),
    ("Misconfigured", 500),
    ("Unavailable", 503),
    ("QuotaExceeded", 507),
]
RETRYABLE = ("TooManyRequests", "Unavailable")


def _expected_body(kind: str) -> dict:
    return {"error": f"refused_as_{kind.lower()}", "detail": f"Refused as {kind}.", "limit": 3}


# -- business code outside HTTP -----------------------------------------------------------------


def test_a_service_called_from_a_command_raises_the_domain_error_with_no_status():
    # Given no request at all (a command, a task, another service)
    # When the item service is asked for an item with a blank title
    with pytest.raises(Invalid) as refused:
        item_services.item_create(app=app_or_404("notebook"), title="  ", actor=Actor("alice"))

    # Then it raises the domain error with its code and detail, and nothing about HTTP
    assert refused.value.error == "validation_error"
    assert "needs a title" in refused.value.detail
    assert not isinstance(refused.value, APIException)
    assert not hasattr(refused.value, "status_code")


def test_the_file_store_refuses_a_path_out_of_the_workspace_with_a_domain_error(tmp_path):
    # Given a workspace folder
    # When a caller outside HTTP names a path above it
    with pytest.raises(Invalid) as refused:
        filestore.resolve(tmp_path, "../escape.txt")

    # Then it is the `invalid_path` refusal, naming the path
    assert (refused.value.error, refused.value.extra["path"]) == ("invalid_path", "../escape.txt")


def test_a_workflow_run_on_no_item_is_refused_as_invalid_not_as_a_400():
    # Given a caller outside HTTP / When it runs a workflow on no item
    with pytest.raises(Invalid) as refused:
        workflow_services.workflow_run_on_item(workflow_id="w", item_id=" ", actor=Actor("alice"))
    # Then the workflow service says what is missing, with no status
    assert refused.value.error == "item_required"


def test_knowledge_refuses_a_stranger_with_a_domain_error():
    # Given alice's collection
    collection = knowledge_services.collection_create(actor=Actor("alice"), name="Handbook")
    # When bob renames it outside HTTP / Then he is refused by kind, not by status
    with pytest.raises(DomainError) as refused:
        knowledge_services.collection_rename(collection_id=collection.id, actor=Actor("bob"), name="Mine")
    assert isinstance(refused.value, NotFound | Forbidden)


# -- the API ------------------------------------------------------------------------------------


@pytest.mark.urls("tests.ops.error_urls")
@pytest.mark.parametrize("view", ["api", "kind"], ids=["drf_view", "plain_view"])
@pytest.mark.parametrize(("kind", "status"), KINDS)
def test_each_kind_answers_an_api_client_with_its_status_json_body_and_headers(client, view, kind, status):
    # Given a DRF view, or a plain Django view, that raises one kind of domain error
    # When an API client calls it
    response = client.get(f"/test-errors/{view}/{kind}", **JSON)

    # Then it gets the kind's status, the body {"error", "detail", ...extra} and Retry-After only
    # where the error says when to come back: DRF's handler and the site's middleware agree
    assert response.status_code == status
    assert response.json() == _expected_body(kind)
    assert response.get("Retry-After") == ("7" if kind in RETRYABLE else None)


@pytest.mark.urls("tests.ops.error_urls")
@pytest.mark.parametrize(("kind", "status"), KINDS)
def test_each_kind_answers_a_browser_with_the_sites_page(client, kind, status):
    # Given the same view / When a browser opens it
    response = client.get(f"/test-errors/kind/{kind}", **HTML)

    # Then it gets the site's own page with the kind's status, and the detail (the 404 page names
    # the address instead, so that missing and not yours read the same)
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    assert b'data-testid="error-page"' in response.content
    assert (f"Refused as {kind}.".encode() in response.content) == (status != 404)


def test_a_quota_refusal_lists_the_other_binding_limits_as_bodies_of_their_own():
    # Given a quota refusal that names a second binding limit
    memory = QuotaExceeded(error="sandbox_quota_exceeded", detail="Memory.", dimension="memory")
    refusal = QuotaExceeded(error="sandbox_quota_exceeded", detail="Count.", dimension="sandboxes", also=[memory])

    # When the edge renders it / Then `also` holds the other limit's body
    assert body_of(refusal) == {
        "error": "sandbox_quota_exceeded",
        "detail": "Count.",
        "dimension": "sandboxes",
        "also": [{"error": "sandbox_quota_exceeded", "detail": "Memory.", "dimension": "memory"}],
    }
    assert status_of(refusal) == 507


def test_a_stream_ends_with_the_body_the_json_answer_would_have():
    # Given the refusals a stream may meet midway
    # When each becomes the stream's `error` event / Then it is the same body as the JSON answer's
    assert refusal_body(Forbidden(error="read_only_share", detail="Read only.")) == {
        "error": "read_only_share",
        "detail": "Read only.",
    }
    assert refusal_body(Http404()) == {"error": "not_found", "detail": "Not found."}
    assert refusal_body(DataError())["error"] == "invalid_value"


# -- admin and forms ----------------------------------------------------------------------------


def test_a_refusal_in_admin_is_an_error_message_on_the_page():
    # Given a staff request in the item admin
    request = RequestFactory().post("/admin/items/item/")
    request.session = {}
    request._messages = FallbackStorage(request)  # type: ignore[attr-defined]

    # When an action there is refused
    admin_refused(ItemAdmin(Item, admin.site), request, Unavailable(error="busy", detail="The host is busy."))

    # Then the page shows the detail as an error message
    [shown] = list(messages.get_messages(request))
    assert (shown.message, shown.level) == ("The host is busy.", messages.ERROR)


def test_a_refused_value_in_a_form_is_that_fields_error():
    # Given a refusal of a value / When a form shows it / Then it is the field's error, with the code
    problem = form_error(Invalid(error="title_too_long", detail="Too long."))
    assert (problem.messages, problem.code) == (["Too long."], "title_too_long")


# -- the worker ---------------------------------------------------------------------------------


def test_a_task_stopped_by_a_domain_error_fails_naming_the_code_and_detail(monkeypatch, clock, settings):
    # Given an ingest whose store is refused by a service on every attempt
    settings.WORKSPACE_TASK_MAX_ATTEMPTS = 1

    def refuse(**_kwargs: object) -> bool:
        raise Unavailable(error="search_unavailable", detail="The search index is down.")

    monkeypatch.setattr(ingest, "document_chunks_store", refuse)
    collection = knowledge_services.collection_create(actor=Actor("alice"), name="Handbook")
    knowledge_services.document_upload(
        collection_id=collection.id, actor=Actor("alice"), filename="a.txt", content_type="text/plain", data=b"Text."
    )

    # When the worker runs it
    [ran] = drain(WorkerIdentity(worker_id="worker-a"))

    # Then the task failed, its line naming the refusal's code and detail
    assert (ran.outcome, ran.detail) == ("failed", "search_unavailable: The search index is down.")
    assert failure_line(ValueError("bad")) == "ValueError: bad"


# -- nothing else builds an error body or raises DRF's errors -----------------------------------

ROOT = Path(__file__).resolve().parents[2]
# The edge: the API's mapping, the site's pages, and the sandbox host (its own small HTTP server,
# which answers its own protocol's errors). crudgen is a library with its own error contract.
EDGE = {"collab/edge.py", "workspace/errors.py", "workspace/sandboxes/host.py"}
PACKAGES = ("collab", "knowledge", "quotas", "workspace")


def _our_modules() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts and path.relative_to(ROOT).as_posix() not in EDGE
    ]


def _hand_built_bodies(tree: ast.AST) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        and any(isinstance(key, ast.Constant) and key.value == "error" for key in node.keys)
    ]


def test_no_module_outside_the_edge_builds_an_error_body_by_hand():
    # Given every module of ours but the edge
    # When each is read / Then none writes a dict with an "error" key (collab.edge.body_of does)
    found = {
        path.relative_to(ROOT).as_posix(): lines
        for path in _our_modules()
        if (lines := _hand_built_bodies(ast.parse(path.read_text())))
    }
    # The OpenAPI schema of the error body describes it; it builds no answer.
    assert found == {"collab/schema.py": found.get("collab/schema.py", [])}
    assert "collab/schema.py" in found


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.update({node.module, *(f"{node.module}.{alias.name}" for alias in node.names)})
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _gives_a_status(node: ast.AST) -> bool:
    """`status_code=` passed to a call, or `status_code = ...` in a class's body (an error class
    that carries its status, as crudgen's do)."""
    if isinstance(node, ast.Call):
        return any(keyword.arg == "status_code" for keyword in node.keywords)
    if not isinstance(node, ast.ClassDef):
        return False
    targets = [
        target
        for statement in node.body
        if isinstance(statement, ast.Assign | ast.AnnAssign)
        for target in (statement.targets if isinstance(statement, ast.Assign) else [statement.target])
    ]
    return any(isinstance(target, ast.Name) and target.id == "status_code" for target in targets)


def test_no_module_outside_the_edge_uses_drf_exceptions_or_an_http_status_to_refuse():
    # Given every module of ours but the edge
    # When their imports and raises are read
    drf = {
        path.relative_to(ROOT).as_posix()
        for path in _our_modules()
        if "rest_framework.exceptions" in _imports(ast.parse(path.read_text()))
    }
    with_status = [
        f"{path.relative_to(ROOT).as_posix()}:{node.lineno}"
        for path in _our_modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if _gives_a_status(node)
    ]
    # Then none imports DRF's exceptions and no error is built with a status or declares one
    assert drf == set()
    assert with_status == []


def test_business_modules_know_nothing_of_http_errors():
    # Given the modules that hold business rules (services, selectors, access, the file store,
    # the sandbox lifecycle, the quota gates, workflow definitions)
    business = [
        path
        for path in _our_modules()
        if path.name in ("services.py", "selectors.py", "access.py", "filestore.py", "filebatch.py", "disk.py")
        or path.relative_to(ROOT).as_posix()
        in ("workspace/items/lifecycle.py", "workspace/workflows/definitions.py", "collab/tokens.py")
    ]
    # When their imports are read / Then none imports DRF or the edge's mapping
    offending = {
        path.relative_to(ROOT).as_posix(): sorted(
            name for name in _imports(ast.parse(path.read_text())) if name.startswith(("rest_framework", "collab.edge"))
        )
        for path in business
    }
    assert {path: names for path, names in offending.items() if names} == {}
    assert len(business) >= 15
    # And every kind they may raise has its status at the edge
    kinds = {
        value
        for name, value in vars(errors).items()
        if isinstance(value, type)
        and issubclass(value, DomainError)
        and value is not DomainError
        and not name.startswith("_")
    }
    assert kinds == set(STATUS_BY_KIND)

"""The document says every rule a generated list enforces, and the routes refuse what it forbids
(issue 46.1): page bounds, typed parameters given empty, text with NUL characters, JSON Pointers."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from crudgen import CRUDSystem, MetadataConfig, RouteConfig
from crudgen.storage.base import Storage
from tests.crudgen.conftest import Clock
from tests.crudgen.test_data_filters import TODOS, Todo, _system

pytestmark = pytest.mark.django_db


@pytest.fixture
def todo_api(storage_factory: Callable[[str], Storage], clock: Clock, mount: Callable[..., None]) -> APIClient:
    system = _system(storage_factory, clock)
    for todo in TODOS:
        system.get_crud(Todo).create(todo, user="alice")
    mount(system.create_router("/api", RouteConfig()))
    return APIClient()


@pytest.fixture
def document(mount: Callable[..., None]) -> dict:
    system = CRUDSystem(use_plural=False, metadata_config=MetadataConfig.with_full_tracking())
    system.register_model(Todo)
    mount(system.create_app(title="Todos", version="1", route_config=RouteConfig()))
    response = APIClient().get("/api/v1/openapi.json", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def _parameters(document: dict, path: str, method: str = "get") -> dict[str, dict]:
    return {p["name"]: p["schema"] for p in document["paths"][path][method]["parameters"]}


@pytest.mark.parametrize(
    "query",
    [
        "page=",
        "page_size=",
        "updated_time_start=",
        "created_time_end=",
        "sort_by=",
        "sort_order=",
        "is_deleted=",
        "priority=",
        "done=",
        "colour=",
        "note__isnull=",
        "priority__in=",
    ],
)
def test_a_typed_parameter_given_empty_is_refused_naming_it_on_the_list_and_the_count(
    todo_api: APIClient, query: str
) -> None:
    # Given a list route and its count (todos)
    name = query.rstrip("=")
    # When the parameter is sent with no value
    answers = [todo_api.get(f"/api/todo/{route}?{query}") for route in ("data", "count")]
    # Then both refuse it (422) and name it, rather than reading it as its default
    for answer in answers if not name.startswith(("page", "sort")) else answers[:1]:
        assert answer.status_code == 422, answer.content
        assert answer.json()["error"] == "validation_error"
        assert name in answer.json()["fields"]


def test_an_empty_shape_is_refused_where_the_document_declares_an_enum(todo_api: APIClient) -> None:
    # Given a todo
    resource_id = todo_api.get("/api/todo/meta").json()["items"][0]["resource_id"]
    # When its full view is asked for with an empty shape
    answer = todo_api.get(f"/api/todo/{resource_id}/full?shape=")
    # Then it is a 422 naming shape
    assert answer.status_code == 422
    assert "shape" in answer.json()["fields"]


def test_a_string_filter_may_be_empty_but_not_hold_a_nul_character(todo_api: APIClient) -> None:
    # Given todos
    # When a text filter is sent empty, then with a NUL character
    empty = todo_api.get("/api/todo/data?title=")
    nul = todo_api.get("/api/todo/data?title=a%00b")
    # Then the empty one is taken and the NUL refused with {error, detail}
    assert empty.status_code == 200
    assert nul.status_code == 422
    assert set(nul.json()) >= {"error", "detail"}


def test_the_document_declares_the_page_bounds_and_what_query_text_may_hold(document: dict) -> None:
    # Given the document of a model's routes
    # When a list's parameters are read
    parameters = _parameters(document, "/api/v1/todo/data")
    # Then page and page_size say their bounds, and text says no NUL (and no comma in a list's values)
    assert (parameters["page"]["minimum"], parameters["page"]["maximum"]) == (1, 10**9)
    assert (parameters["page_size"]["minimum"], parameters["page_size"]["maximum"]) == (1, 1000)
    assert parameters["title"]["pattern"] == "^[^\\u0000]*$"
    assert parameters["title__in"]["items"]["pattern"] == "^[^,\\u0000]*$"
    assert parameters["created_by"]["items"]["pattern"] == "^[^,\\u0000]*$"
    # and a number range's side may be empty (open)
    assert {"type": "string", "maxLength": 0} in parameters["priority__range"]["items"]["anyOf"]


def test_the_document_says_restore_takes_only_is_deleted_true(document: dict) -> None:
    # Given the document
    # When restore's parameters are read
    parameters = _parameters(document, "/api/v1/todo/{resource_id}/restore", "post")
    # Then is_deleted may only be true
    assert parameters["is_deleted"]["enum"] == [True]


def test_the_document_says_each_json_patch_operation_with_its_members_and_pointer_format(document: dict) -> None:
    # Given the document's JSON Patch component
    patch = document["components"]["schemas"]["CrudJsonPatch"]
    # When its operations are read
    kinds = {tuple(kind["properties"]["op"]["enum"]): kind for kind in patch["items"]["oneOf"]}
    # Then move and copy require `from`, add/replace/test `value`, and every path is a JSON Pointer
    assert kinds[("move", "copy")]["required"] == ["op", "path", "from"]
    assert kinds[("add", "replace", "test")]["required"] == ["op", "path", "value"]
    assert kinds[("remove",)]["properties"]["path"]["pattern"] == "^(/([^~/]|~[01])*)*$"


def test_text_with_a_nul_character_is_refused_as_the_document_says(document: dict) -> None:
    # Given the todos' routes and their document
    body = document["components"]["schemas"]["TodoRequest"]["properties"]
    todo_api = APIClient()
    # When a todo is created with a NUL character in its title, and in one of its tags
    title = todo_api.post("/api/v1/todo", {"title": "a\x00b", "done": False, "priority": 1}, format="json")
    tag = todo_api.post("/api/v1/todo", {"title": "a", "done": False, "priority": 1, "tags": ["\x00"]}, format="json")
    # Then both are refused naming the field (PostgreSQL could not store them; no storage takes them),
    # and the document's create body says that its text holds no NUL
    assert (title.status_code, tag.status_code) == (422, 422)
    assert "title" in title.json()["fields"]
    assert body["title"]["pattern"] == body["tags"]["items"]["pattern"] == "^[^\\u0000]*$"

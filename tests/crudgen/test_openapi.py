"""create_app and the OpenAPI document of generated routes: valid, exact, served as JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.core.management import call_command
from openapi_spec_validator import validate
from rest_framework.test import APIClient

from crudgen import CRUDSystem, MetadataConfig, RouteConfig
from crudgen.jsonschema import for_openapi
from crudgen.openapi import _CURRENT_REVISION_SCHEMA
from tests.crudgen.conftest import Workflow
from tests.crudgen.example_app import openapi_document

pytestmark = pytest.mark.django_db


@dataclass
class Note:
    id: str
    title: str
    body: str
    created_by: str
    updated_by: str | None
    pinned: bool = False


@pytest.fixture
def schema(mount: Callable[..., None]) -> dict:
    crud_system = CRUDSystem(use_plural=False, metadata_config=MetadataConfig.with_full_tracking())
    crud_system.register_model(Workflow)
    crud_system.register_model(Note, default_values={"body": ""})
    mount(crud_system.create_app(title="Flows", version="9.9.9", route_config=RouteConfig(count=False)))
    response = APIClient().get("/api/v1/openapi.json", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def _request_schema(schema: dict, path: str, method: str) -> dict:
    body = schema["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    return schema["components"]["schemas"][body["$ref"].rpartition("/")[2]]


def test_schema_lists_every_generated_route(schema: dict) -> None:
    # Given a system with the count route switched off
    # When its document is read
    paths = {path for path in schema["paths"] if path.startswith("/api/v1/workflow")}
    # Then every other route of the model is there, and only those
    assert paths == {
        "/api/v1/workflow",
        "/api/v1/workflow/data",
        "/api/v1/workflow/meta",
        "/api/v1/workflow/full",
        "/api/v1/workflow/{resource_id}",
        "/api/v1/workflow/{resource_id}/data",
        "/api/v1/workflow/{resource_id}/meta",
        "/api/v1/workflow/{resource_id}/full",
        "/api/v1/workflow/{resource_id}/restore",
        "/api/v1/workflow/{resource_id}/revision-list",
        "/api/v1/workflow/{resource_id}/switch/{revision_id}",
    }
    assert set(schema["paths"]["/api/v1/workflow/{resource_id}"]) == {"get", "put", "patch", "delete"}


def test_schema_carries_the_model_schema_and_app_info(schema: dict) -> None:
    # Given a registered Workflow dataclass
    # When the document is read
    workflow = schema["components"]["schemas"]["Workflow"]
    data = schema["paths"]["/api/v1/workflow/{resource_id}/data"]["get"]["responses"]["200"]
    # Then reads answer the model's schema, and the app's title and version are the document's
    assert workflow["required"] == ["name", "steps"]
    assert data["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Workflow"}
    assert (schema["info"]["title"], schema["info"]["version"]) == ("Flows", "9.9.9")


def test_schema_documents_list_query_parameters(schema: dict) -> None:
    # Given the meta list route
    # When its parameters are read
    parameters = {p["name"] for p in schema["paths"]["/api/v1/workflow/meta"]["get"]["parameters"]}
    # Then paging, sorting, user and deleted filters are documented
    assert {"page", "page_size", "created_by", "sort_by", "sort_order", "is_deleted"} <= parameters


def test_openapi_json_answers_json_without_being_asked(mount: Callable[..., None]) -> None:
    # Given an app from create_app
    crud_system = CRUDSystem(use_plural=False)
    crud_system.register_model(Workflow)
    mount(crud_system.create_app())
    # When a client asks for openapi.json with no Accept header
    response = APIClient().get("/api/v1/openapi.json")
    # Then the answer is JSON (OpenAPI's own JSON media type)
    assert response["Content-Type"].startswith(("application/json", "application/vnd.oai.openapi+json"))
    assert json.loads(response.content)["openapi"].startswith("3.")


def test_the_document_is_valid_openapi(schema: dict) -> None:
    # Given a document with optional fields (anyOf null in JSON Schema 2020-12)
    # When it is validated against the OpenAPI specification
    validate(schema)
    # Then it is valid 3.0, optional fields written with `nullable`
    assert schema["components"]["schemas"]["Workflow"]["properties"]["every_seconds"]["nullable"] is True


@pytest.mark.parametrize("oas_version", ["3.0.3", "3.1.0"])
def test_a_document_using_every_supported_field_kind_is_valid_in_both_openapi_versions(oas_version: str) -> None:
    # Given the example app (enums, literals, nested dataclasses, TypedDicts, Structs, tuples, bytes, unions)
    # When its document is generated for an OpenAPI version
    document = openapi_document(oas_version)
    # Then it validates as that version
    validate(document)
    assert document["openapi"] == oas_version


def test_the_services_own_document_is_valid_openapi(tmp_path) -> None:
    # Given the service's schema command
    target = tmp_path / "schema.json"
    # When the whole service's document is written
    call_command("spectacular", "--format", "openapi-json", "--file", str(target))
    # Then it validates (the workflow routes included)
    document = json.loads(target.read_text())
    validate(document)
    assert "/api/v1/workflow" in document["paths"]


def test_create_and_replace_bodies_are_closed_and_leave_server_filled_and_defaulted_fields_optional(
    schema: dict,
) -> None:
    # Given a Note whose id, created_by and updated_by the server fills and whose body has a default value
    create = _request_schema(schema, "/api/v1/note", "post")
    replace = _request_schema(schema, "/api/v1/note/{resource_id}", "put")
    # When the create and replace bodies are read
    # Then only the title is required, unknown fields are refused, and the properties are the model's
    assert create == replace
    assert create["required"] == ["title"]
    assert create["additionalProperties"] is False
    assert set(create["properties"]) == {"id", "title", "body", "created_by", "updated_by", "pinned"}
    assert schema["components"]["schemas"]["Note"]["required"] == ["id", "title", "body", "created_by", "updated_by"]


def test_nested_models_are_closed_too() -> None:
    # Given the example app, whose product nests an address, a TypedDict and a Struct
    components = openapi_document()["components"]["schemas"]
    # When their components are read
    closed = {name: components[name].get("additionalProperties") for name in ("Address", "Dimensions", "Label")}
    # Then each refuses unknown fields, as the server does at any depth
    assert closed == {"Address": False, "Dimensions": False, "Label": False}


def test_the_revision_info_shape_of_full_is_described(schema: dict) -> None:
    # Given the single-resource full read
    operation = schema["paths"]["/api/v1/workflow/{resource_id}/full"]["get"]
    shapes = operation["responses"]["200"]["content"]["application/json"]["schema"]["oneOf"]
    # When its answer is read
    keys = [set(shape["required"]) for shape in shapes]
    info = schema["components"]["schemas"]["CrudCurrentRevision"]
    # Then both shapes are there, and revision_info names resource, revision and parent
    assert keys == [{"data", "meta"}, {"data", "revision_info"}]
    assert {"resource_id", "revision_id", "parent_revision_id", "is_deleted"} <= set(info["required"])
    assert {"name": "shape", "in": "query"}.items() <= next(
        p for p in operation["parameters"] if p["name"] == "shape"
    ).items()


def test_the_revision_info_answer_fits_its_schema(api: APIClient, created: dict) -> None:
    # Given a workflow patched once (each storage in turn)
    rid = created["resource_id"]
    api.patch(f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "b2"}], format="json")
    # When its full read is asked in the revision_info shape
    info = api.get(f"/api/workflow/{rid}/full?shape=revision_info").json()["revision_info"]
    described = _CURRENT_REVISION_SCHEMA["properties"]
    # Then every key it answers is described
    assert set(info) <= set(described)


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/api/v1/workflow/data", "get"),
        ("/api/v1/workflow/meta", "get"),
        ("/api/v1/workflow/full", "get"),
        ("/api/v1/workflow", "get"),
    ],
)
def test_data_filters_are_described_on_the_list_routes(schema: dict, path: str, method: str) -> None:
    # Given a list route of Workflow (name, description: strings; every_seconds: optional int; enabled: bool)
    parameters = {p["name"]: p for p in schema["paths"][path][method]["parameters"]}
    # When its parameters are read
    # Then each scalar field's lookups are query parameters, lists as arrays sent as repeated keys
    assert {"name", "name__in", "name__range", "name__contains", "every_seconds__isnull", "enabled"} <= set(parameters)
    assert parameters["every_seconds__range"]["schema"]["items"]["anyOf"][0]["type"] == "integer"
    assert (parameters["name__in"]["style"], parameters["name__in"]["explode"]) == ("form", True)
    assert not any(name.startswith("steps") for name in parameters)


def test_data_filters_are_described_on_count(mount: Callable[..., None]) -> None:
    # Given an app with the count route
    crud_system = CRUDSystem(use_plural=False)
    crud_system.register_model(Workflow)
    mount(crud_system.create_app())
    # When the count operation is read
    document = APIClient().get("/api/v1/openapi.json").json()
    parameters = {p["name"] for p in document["paths"]["/api/v1/workflow/count"]["get"]["parameters"]}
    # Then it takes the same filters as the lists, their page and sort aside
    list_parameters = {p["name"] for p in document["paths"]["/api/v1/workflow/meta"]["get"]["parameters"]}
    assert parameters == list_parameters - {"page", "page_size", "sort_by", "sort_order"}
    assert {"is_deleted", "created_by", "name", "enabled", "every_seconds__range"} <= parameters


def test_if_match_is_offered_only_where_a_write_honours_it(schema: dict) -> None:
    # Given the document of a model
    def headers(path: str, method: str) -> set[str]:
        operation = schema["paths"][path][method]
        return {p["name"] for p in operation["parameters"] if p["in"] == "header"}

    # When the writes are read
    # Then a create offers no If-Match and no 412; writes to an existing resource offer both
    assert "If-Match" not in headers("/api/v1/workflow", "post")
    assert "412" not in schema["paths"]["/api/v1/workflow"]["post"]["responses"]
    for path, method in [
        ("/api/v1/workflow/{resource_id}", "put"),
        ("/api/v1/workflow/{resource_id}", "patch"),
        ("/api/v1/workflow/{resource_id}", "delete"),
        ("/api/v1/workflow/{resource_id}/restore", "post"),
        ("/api/v1/workflow/{resource_id}/switch/{revision_id}", "post"),
    ]:
        assert "If-Match" in headers(path, method)
        assert "412" in schema["paths"][path][method]["responses"]


def test_restore_and_no_op_writes_say_what_they_do(schema: dict) -> None:
    # Given the document of a model
    restore = schema["paths"]["/api/v1/workflow/{resource_id}/restore"]["post"]
    # When restore, replace and patch are read
    # Then restore documents its is_deleted precondition and its 409; writes say identical data makes no revision
    assert "409" in restore["responses"]
    assert "not_deleted" in restore["description"]
    for method in ("put", "patch"):
        assert "no new revision" in schema["paths"]["/api/v1/workflow/{resource_id}"][method]["description"]


def test_null_members_become_nullable_in_openapi_30_and_stay_in_31() -> None:
    # Given JSON Schema 2020-12 with a nullable reference, a const, a tuple and an exclusive bound
    source = {
        "type": "object",
        "properties": {
            "ref": {"anyOf": [{"$ref": "#/components/schemas/A"}, {"type": "null"}], "default": None},
            "const": {"const": "x"},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}], "items": False},
            "positive": {"type": "integer", "exclusiveMinimum": 0},
        },
    }
    # When it is written for each OpenAPI version
    v30, v31 = for_openapi(source, "3.0.3"), for_openapi(source, "3.1.0")
    # Then 3.0 gets its own dialect (and a property named like a keyword is left alone) and 3.1 the source
    assert v30["properties"]["ref"] == {
        "allOf": [{"$ref": "#/components/schemas/A"}],
        "nullable": True,
        "default": None,
    }
    assert v30["properties"]["const"] == {"enum": ["x"]}
    assert v30["properties"]["pair"] == {"type": "array", "items": {"anyOf": [{"type": "integer"}]}}
    assert v30["properties"]["positive"] == {"type": "integer", "minimum": 0, "exclusiveMinimum": True}
    assert v31 == source


def test_each_request_body_advertises_the_media_types_its_route_parses(schema: dict) -> None:
    # Given the document of a system
    # When the request bodies of the workflow's writes are read
    media = {
        (path, method): list(operation["requestBody"]["content"])
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if path.startswith("/api/v1/workflow") and "requestBody" in operation
    }
    # Then a create and a replace take JSON, a patch JSON Patch first and plain JSON too, and none
    # offers a form encoding
    assert media == {
        ("/api/v1/workflow", "post"): ["application/json"],
        ("/api/v1/workflow/{resource_id}", "put"): ["application/json"],
        ("/api/v1/workflow/{resource_id}", "patch"): ["application/json-patch+json", "application/json"],
    }

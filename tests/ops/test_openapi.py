"""The one OpenAPI schema: every endpoint, with its error bodies, generated without a warning."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

SPEC_PATHS = {
    "/healthz",
    "/me",
    "/users",
    "/notifications",
    "/notifications/{notification_id}/read",
    "/notifications/read-all",
    "/kb/collections",
    "/kb/collections/{collection_id}/documents",
    "/kb/documents/{document_id}",
    "/kb/documents/chunks",
    "/kb/documents/{document_id}/chunks",
    "/kb/chats",
    "/kb/chats/{chat_id}",
    "/kb/chats/{chat_id}/messages",
    "/kb/chats/{chat_id}/share",
    "/kb/chats/{chat_id}/share/{user_id}",
    "/investigations",
    "/investigations/{investigation_id}",
    "/investigations/{investigation_id}/mentions",
    "/investigations/{investigation_id}/status",
    "/a/{slug}/items",
    "/a/{slug}/items/{item_id}",
    "/a/{slug}/items/{item_id}/exec",
    "/a/{slug}/items/{item_id}/messages",
    "/a/{slug}/items/{item_id}/workflows/{workflow_id}/run",
    "/a/{slug}/items/{item_id}/files/{file_path}",
    "/a/{slug}/items/{item_id}/files:batch",
    "/me/resources",
    "/me/resources/live/{item_id}",
    "/admin/user-resources",
    "/admin/user-resources/{user_id}",
    "/api/v1/workflow",
    "/api/v1/workflow/data",
    "/api/v1/workflow/meta",
    "/api/v1/workflow/full",
    "/api/v1/workflow/{resource_id}",
    "/api/v1/workflow/{resource_id}/data",
    "/api/v1/workflow/{resource_id}/meta",
    "/api/v1/workflow/{resource_id}/full",
    "/api/v1/workflow/{resource_id}/switch/{revision_id}",
    "/api/v1/workflow/{resource_id}/restore",
}
_METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture
def schema(client: Client) -> dict:
    response = client.get("/api/schema", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def _operations(schema: dict):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if method in _METHODS:
                yield path, method, operation


def test_schema_lists_every_spec_endpoint(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    # When its paths are compared with the spec's endpoints / Then none is missing
    assert SPEC_PATHS - set(schema["paths"]) == set()


def test_schema_generation_passes_with_warnings_as_failures(tmp_path: Path) -> None:
    # Given a file to write the schema into
    target = tmp_path / "schema.yaml"

    # When the schema is generated with every warning a failure
    call_command("spectacular", "--fail-on-warn", "--file", str(target))

    # Then it is written, an OpenAPI document
    assert target.read_text().startswith("openapi:")


def test_every_operation_has_a_unique_operation_id(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    # When the operation ids are collected
    ids = [operation["operationId"] for _path, _method, operation in _operations(schema)]

    # Then no two are the same
    assert len(ids) == len(set(ids))


def test_every_operation_documents_the_shared_error_body(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    error_ref = {"$ref": "#/components/schemas/ErrorOutput"}
    # When each operation's responses are read
    for path, method, operation in _operations(schema):
        responses = operation["responses"]
        # Then each documents 401 with the shared error body, 404 where the path names a row, 400 or 422 on writes
        assert responses["401"]["content"]["application/json"]["schema"] == error_ref, (method, path)
        if "{" in path:
            assert "404" in responses, (method, path)
        if method != "get":
            assert "400" in responses or "422" in responses, (method, path)
    # Then the shared error body requires an error code and a detail
    assert set(schema["components"]["schemas"]["ErrorOutput"]["required"]) == {"error", "detail"}


def test_each_way_of_naming_the_caller_is_an_alternative_requirement(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    # When the security of /me is read / Then basic auth, the session cookie and the mock header each suffice alone
    assert schema["paths"]["/me"]["get"]["security"] == [
        {"basicAuth": []},
        {"cookieAuth": []},
        {"mockUserHeader": []},
    ]


def test_status_enums_are_named_after_their_models(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    # When its components are read
    components = schema["components"]["schemas"]

    # Then the document and investigation status enums are named after their models and list their statuses
    assert components["DocumentStatusEnum"]["enum"] == ["pending", "ready", "failed"]
    assert components["InvestigationStatusEnum"]["enum"] == ["open", "in_progress", "resolved", "closed"]


def test_file_download_is_documented_with_any_media_type(schema: dict) -> None:
    # Found by the fuzzer: a stored README.md comes back as text/markdown, not octet-stream.
    # Given the OpenAPI schema the service serves
    # When the file download's 200 response is read
    content = schema["paths"]["/a/{slug}/items/{item_id}/files/{file_path}"]["get"]["responses"]["200"]["content"]

    # Then it admits any media type
    assert set(content) == {"*/*"}


def test_health_check_needs_no_credentials_in_the_schema(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    # When the health check's operation is read
    operation = schema["paths"]["/healthz"]["get"]

    # Then it needs no credentials and documents both 200 and 503
    assert operation.get("security", []) in ([], [{}])
    assert {"200", "503"} <= set(operation["responses"])


def test_exec_command_is_documented_as_a_string_or_an_argv_list(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    # When exec's command property is read
    command = schema["components"]["schemas"]["ExecInput"]["properties"]["command"]

    # Then it is a string or an array of arguments
    assert [option["type"] for option in command["oneOf"]] == ["string", "array"]


# The spec fixes epoch milliseconds for these two resources only; every other time is ISO 8601.
_EPOCH_MS_TIMES = {("NotificationOutput", "created_at")}


def _time_properties(schema: dict):
    for name, component in schema["components"]["schemas"].items():
        for field, definition in component.get("properties", {}).items():
            if field.endswith("_at") or field.endswith("_time"):
                yield name, field, definition


def test_times_are_iso_8601_except_where_the_spec_says_epoch_milliseconds(schema: dict) -> None:
    # Given the service's schema
    # When every time field of every component is read
    times = list(_time_properties(schema))
    # Then the spec's epoch-ms fields are integers and every other time is an ISO 8601 date-time
    assert times
    for name, field, definition in times:
        expected = "integer" if (name, field) in _EPOCH_MS_TIMES else "date-time"
        assert definition.get("format", definition.get("type")) == expected, (name, field, definition)


# The request media types an endpoint parses besides JSON: an upload, and the raw bytes of a file write.
_NOT_JSON = {
    ("/kb/collections/{collection_id}/documents", "post"): ["multipart/form-data"],
    ("/a/{slug}/items/{item_id}/files/{file_path}", "put"): ["application/octet-stream"],
    ("/api/v1/workflow/{resource_id}", "patch"): ["application/json-patch+json"],
}


def test_every_request_body_advertises_only_the_media_type_its_endpoint_takes(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    # When each operation's request media types are read
    media = {
        (path, method): list(operation["requestBody"]["content"])
        for path, method, operation in _operations(schema)
        if "requestBody" in operation
    }
    # Then JSON endpoints take JSON only, the upload multipart only, and no form encoding is offered
    assert {key: types for key, types in media.items() if types != ["application/json"]} == _NOT_JSON
    assert len(media) > 20

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
    # When the security of /me is read
    # Then a token (Bearer or Token), the session cookie, Basic and the mock header each suffice alone
    assert schema["paths"]["/me"]["get"]["security"] == [
        {"bearerAuth": []},
        {"tokenAuth": []},
        {"cookieAuth": []},
        {"basicAuth": []},
        {"mockUserHeader": []},
    ]
    schemes = schema["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {**schemes["bearerAuth"], "type": "http", "scheme": "bearer"}
    assert (schemes["tokenAuth"]["in"], schemes["tokenAuth"]["name"]) == ("header", "Authorization")


def test_the_notification_poll_documents_its_conditional_request(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    operation = schema["paths"]["/notifications"]["get"]
    # When the inbox operation is read
    headers = {p["name"] for p in operation["parameters"] if p["in"] == "header"}
    # Then it takes If-None-Match, answers 304, and both answers carry ETag and X-Poll-Interval
    assert "If-None-Match" in headers
    for code in ("200", "304"):
        assert {"ETag", "X-Poll-Interval"} <= set(operation["responses"][code]["headers"])


@pytest.mark.parametrize(
    ("path", "method", "code"),
    [
        ("/a/{slug}/items", "post", "201"),
        ("/investigations", "post", "201"),
        ("/kb/collections", "post", "201"),
        ("/kb/collections/{collection_id}/documents", "post", "202"),
        ("/kb/chats", "post", "201"),
        ("/kb/chats/{chat_id}/copy", "post", "201"),
        ("/me/tokens", "post", "201"),
        ("/api/v1/workflow", "post", "201"),
    ],
)
def test_every_create_documents_the_location_of_what_it_made(schema: dict, path: str, method: str, code: str) -> None:
    # Given the OpenAPI schema the service serves
    # When a create's answer is read
    # Then it carries a Location header
    assert "Location" in schema["paths"][path][method]["responses"][code]["headers"]


def test_every_refusal_to_wait_for_documents_retry_after(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    # When every 429 and 503 answer is read
    waits = [
        operation["responses"][code]
        for _, _, operation in _operations(schema)
        for code in ("429", "503")
        if code in operation["responses"]
    ]
    # Then each says Retry-After
    assert waits
    assert all("Retry-After" in response["headers"] for response in waits)


def test_status_enums_are_named_after_their_models(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    # When its components are read
    components = schema["components"]["schemas"]

    # Then the document and investigation status enums are named after their models and list their statuses
    assert components["DocumentStatusEnum"]["enum"] == ["pending", "ready", "failed"]
    assert components["InvestigationStatusEnum"]["enum"] == ["open", "in_progress", "resolved", "closed"]


def test_file_download_is_documented_as_bytes_of_any_media_type(schema: dict) -> None:
    # Found by the fuzzer: a stored README.md comes back as text/markdown, not octet-stream; and
    # openapi-python-client skips a response it only knows as `*/*`.
    # Given the OpenAPI schema the service serves
    # When the file download's 200 response is read
    content = schema["paths"]["/a/{slug}/items/{item_id}/files/{file_path}"]["get"]["responses"]["200"]["content"]

    # Then it is binary, first as application/octet-stream (which generators read), and admits any media type
    assert list(content) == ["application/octet-stream", "*/*"]
    assert {media["schema"]["format"] for media in content.values()} == {"binary"}


def test_the_knowledge_base_upload_documents_its_file_as_binary(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    # When the upload's multipart body is read
    body = schema["paths"]["/kb/collections/{collection_id}/documents"]["post"]["requestBody"]["content"]
    upload = schema["components"]["schemas"][body["multipart/form-data"]["schema"]["$ref"].rpartition("/")[2]]

    # Then its file is a binary part (a client sends the bytes as a file), not a URI string
    assert upload["properties"]["file"] == {"type": "string", "format": "binary"}


def test_a_chat_message_is_documented_as_text(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    # When chat send's content property is read
    content = schema["components"]["schemas"]["ChatSendInput"]["properties"]["content"]

    # Then it is a string (the service refuses anything else with 400 `empty_message`)
    assert content["type"] == "string"


def test_no_operation_is_described_by_the_docstring_of_the_base_api_view(schema: dict) -> None:
    # Given the OpenAPI schema the service serves, and the base view every API view extends
    from collab.api import ServiceApiView

    base_doc = ServiceApiView.__doc__.split("\n")[0]
    # When every operation's description is read
    described = [operation.get("description", "") for _path, _method, operation in _operations(schema)]

    # Then none repeats the base view's docstring (about parsing, not about any endpoint)
    assert [description for description in described if base_doc in description] == []


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
    # A JSON Patch is taken as plain JSON too.
    ("/a/{slug}/items/{item_id}/files/{file_path}", "put"): ["application/octet-stream"],
    ("/api/v1/workflow/{resource_id}", "patch"): ["application/json-patch+json", "application/json"],
}


def test_every_request_body_advertises_only_the_media_type_its_endpoint_takes(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    # When each operation's request media types are read
    media = {
        (path, method): list(operation["requestBody"]["content"])
        for path, method, operation in _operations(schema)
        if "requestBody" in operation
    }
    # Then each says what it takes: JSON endpoints JSON only, the upload multipart only, a file's bytes
    # as octet-stream, a patch JSON Patch or JSON, and no form encoding is offered to a JSON endpoint
    assert {key: types for key, types in media.items() if types != ["application/json"]} == _NOT_JSON
    assert len(media) > 20


def test_every_quota_refusal_and_sign_in_challenge_is_documented_with_its_fields(schema: dict) -> None:
    # Given the OpenAPI schema the service serves
    schemas = schema["components"]["schemas"]
    # When each operation's 507 and 401 are read
    for path, method, operation in _operations(schema):
        responses = operation["responses"]
        # Then a 507 is one of the refusals, told apart by `error`, and a 401 names its challenge header
        if "507" in responses:
            body = responses["507"]["content"]["application/json"]["schema"]
            assert body["discriminator"]["propertyName"] == "error", (method, path)
        assert "WWW-Authenticate" in responses["401"]["headers"], (method, path)
    # And each refusal requires the fields a client reads
    assert {"dimension", "used", "limit", "requested"} <= set(schemas["SandboxQuotaRefusal"]["required"])
    assert {"used", "quota", "attempted"} <= set(schemas["DiskQuotaRefusal"]["required"])


def test_a_real_null_in_a_nullable_reference_passes_a_strict_openapi_3_0_validator(
    alice_api, make_item, documented_body, settings
) -> None:
    # Given alice's notebook with no sandbox open and no disk measured, and bob with no override
    item = make_item(owner="alice")
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    # When its detail and bob's limits are read
    detail = alice_api.get(f"/a/{item.app_slug}/items/{item.pk}")
    limits = alice_api.get("/admin/user-resources/bob")
    assert (detail.json()["sandbox"], detail.json()["disk"], limits.json()["override"]) == (None, None, None)
    # Then both bodies, nulls and all, are what the document says, read by a strict 3.0 validator
    documented_body(detail, "/a/{slug}/items/{item_id}", "get")
    documented_body(limits, "/admin/user-resources/{user_id}", "get")


STREAMING = {
    ("/a/{slug}/items/{item_id}/exec", "post"): {"started", "output", "result", "error"},
    ("/a/{slug}/items/{item_id}/messages", "post"): {"delta", "restart", "tool", "step", "turn", "error"},
    ("/kb/chats/{chat_id}/messages", "post"): {"delta", "restart", "answer", "error"},
}


def test_no_operation_offers_a_format_parameter_that_asks_for_a_stream(schema: dict) -> None:
    # Given the document / When every operation's query parameters are read
    offered = [
        (method, path)
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if isinstance(operation, dict)
        and any(parameter["name"] == "format" for parameter in operation.get("parameters", ()))
    ]
    # Then none offers `format` (a generated client would ask for events it parses as JSON)
    assert offered == []


@pytest.mark.parametrize(("path", "method"), list(STREAMING))
def test_a_streaming_operation_says_what_its_stream_is_and_how_to_ask_for_it(schema: dict, path: str, method: str):
    # Given a streaming operation / When its document is read
    operation = schema["paths"][path][method]
    streams = [
        media["schema"]
        for response in operation["responses"].values()
        for kind, media in response.get("content", {}).items()
        if kind == "text/event-stream"
    ]
    # Then one answer is a text/event-stream of the named events, asked for with the Accept header
    assert len(streams) == 1
    assert set(streams[0]["properties"]["event"]["enum"]) == STREAMING[(path, method)]
    assert "`Accept: text/event-stream`" in operation["description"]


def test_the_message_list_is_documented_as_json_alone(schema: dict) -> None:
    # Given the list of an item's messages, which answers JSON whatever the Accept header asks
    # When its document is read / Then its one answer is application/json
    assert list(schema["paths"]["/a/{slug}/items/{item_id}/messages"]["get"]["responses"]["200"]["content"]) == [
        "application/json"
    ]

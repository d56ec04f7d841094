"""One JSON line per request on `workspace.requests`: who, what, how long, and which refusal."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tests.fixtures.items import item_url

pytestmark = pytest.mark.django_db


def _lines(caplog: pytest.LogCaptureFixture) -> list[dict]:
    return [json.loads(record.getMessage()) for record in caplog.records if record.name == "workspace.requests"]


def test_each_request_logs_one_json_line_with_method_path_status_and_user(request_log, bob_api) -> None:
    # Given the request log watched
    # When bob reads his notifications with a query string
    bob_api.get("/notifications?limit=5")

    # Then one JSON line records the method, the path without the query, the status, bob and the duration, and no error
    [line] = _lines(request_log)
    assert line["method"] == "GET"
    assert line["path"] == "/notifications"
    assert line["status"] == 200
    assert line["user_id"] == "bob"
    assert isinstance(line["duration_ms"], float)
    assert "error" not in line


def test_an_error_response_logs_its_error_code(request_log, bob_api) -> None:
    # Given the request log watched
    # When bob asks for a limit of zero
    bob_api.get("/notifications?limit=0")

    # Then the line records the 400 and its error code
    [line] = _lines(request_log)
    assert (line["status"], line["error"]) == (400, "validation_error")


def test_a_rejected_identity_is_logged_without_a_user(request_log, client: Client) -> None:
    # Given the request log watched
    # When a request names mallory, who is not in the directory
    client.get("/me", HTTP_X_USER_ID="mallory", HTTP_ACCEPT="application/json")

    # Then the line records the 401 and its error, and no user
    [line] = _lines(request_log)
    assert (line["status"], line["error"], line["user_id"]) == (401, "unknown_user", None)


def test_a_sandbox_refusal_logs_its_code_and_dimension(request_log, per_user, alice_api, make_item) -> None:
    # Given the request log watched, alice allowed one sandbox, and one open
    per_user(count=1, cpu=10, memory="10G")
    first, second = make_item(), make_item()
    assert alice_api.post(item_url(first, "/exec"), {"command": "true"}, format="json").status_code == 200

    # When she runs a command in another notebook
    alice_api.post(item_url(second, "/exec"), {"command": "true"}, format="json")

    # Then the last line records the 507 with its code, the dimension that refused and alice
    refusal = _lines(request_log)[-1]
    assert refusal["status"] == 507
    assert (refusal["error"], refusal["dimension"], refusal["user_id"]) == (
        "sandbox_quota_exceeded",
        "sandboxes",
        "alice",
    )


def test_a_file_download_is_logged_without_reading_its_body(request_log, alice_api, make_item) -> None:
    # Given the request log watched and alice's notes.txt
    item = make_item()
    alice_api.put(item_url(item, "/files/notes.txt"), b"hello", content_type="application/octet-stream")

    # When she downloads it
    response = alice_api.get(item_url(item, "/files/notes.txt"))

    # Then she gets the whole file, and the line is logged with its status
    assert b"".join(response.streaming_content) == b"hello"
    assert _lines(request_log)[-1]["status"] == 200

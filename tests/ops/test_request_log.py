"""One JSON line per request on `workspace.requests`: who, what, how long, and which refusal; a
quota's refusal is no error of the server on `django.request`."""

from __future__ import annotations

import json
import logging

import pytest
from django.test import Client

from tests.fixtures.items import item_url

pytestmark = pytest.mark.django_db

SSE = {"HTTP_ACCEPT": "text/event-stream"}


def _lines(caplog: pytest.LogCaptureFixture) -> list[dict]:
    return [json.loads(record.getMessage()) for record in caplog.records if record.name == "workspace.requests"]


def _django_levels(caplog: pytest.LogCaptureFixture) -> list[int]:
    return [record.levelno for record in caplog.records if record.name == "django.request"]


@pytest.fixture
def alice_at_her_sandbox_limit(request_log, per_user, alice_api, make_item) -> pytest.LogCaptureFixture:
    """Alice allowed one sandbox, and one open; the request log watched from here on."""
    per_user(count=1, cpu=10, memory="10G")
    assert alice_api.post(item_url(make_item(), "/exec"), {"command": "true"}, format="json").status_code == 200
    request_log.clear()
    return request_log


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


def test_a_quota_refusal_of_the_api_is_one_line_and_no_error_of_django(
    alice_at_her_sandbox_limit, alice_api, make_item
) -> None:
    # Given alice at her limit of one sandbox, the request log watched
    # When she runs a command in another notebook through the API
    response = alice_api.post(item_url(make_item(), "/exec"), {"command": "true"}, format="json")

    # Then one line records the 507 with its code and dimension
    assert response.status_code == 507
    [line] = _lines(alice_at_her_sandbox_limit)
    assert (line["status"], line["error"], line["dimension"]) == (507, "sandbox_quota_exceeded", "sandboxes")
    # And Django logs it once, as the refusal it is (a warning), not as an error of the server
    assert _django_levels(alice_at_her_sandbox_limit) == [logging.WARNING]


def test_a_quota_refusal_of_a_streamed_command_logs_its_code_and_dimension(
    alice_at_her_sandbox_limit, alice_api, make_item
) -> None:
    # Given alice at her limit of one sandbox, the request log watched
    # When the terminal of another notebook runs a command, asking for its events
    response = alice_api.post(item_url(make_item(), "/exec"), {"command": "true"}, format="json", **SSE)

    # Then the refusal comes back as the JSON it is, and its line records the code and dimension
    assert (response.status_code, response["Content-Type"]) == (507, "application/json")
    [line] = _lines(alice_at_her_sandbox_limit)
    assert (line["error"], line["dimension"]) == ("sandbox_quota_exceeded", "sandboxes")
    assert logging.ERROR not in _django_levels(alice_at_her_sandbox_limit)


def test_a_quota_refusal_of_a_streamed_chat_message_logs_its_code_and_dimension(
    alice_at_her_sandbox_limit, alice_api, make_item
) -> None:
    # Given alice at her limit of one sandbox, the request log watched
    # When the chat of another notebook sends a message, asking for the turn's events
    response = alice_api.post(item_url(make_item(), "/messages"), {"content": "$ true"}, format="json", **SSE)

    # Then its one line records the 507 with its code and dimension, and Django logs no error
    assert response.status_code == 507
    [line] = _lines(alice_at_her_sandbox_limit)
    assert (line["status"], line["error"], line["dimension"]) == (507, "sandbox_quota_exceeded", "sandboxes")
    assert logging.ERROR not in _django_levels(alice_at_her_sandbox_limit)


def test_a_quota_refusal_shown_on_a_page_logs_its_code_and_dimension(
    request_log, write_config, client: Client, make_item
) -> None:
    # Given workspaces of 1K, alice's notebook and the request log watched
    write_config('[sandbox]\nworkspace_quota = "1K"\n')
    item = make_item()
    request_log.clear()

    # When she saves 2K of text in the editor
    response = client.post(
        item_url(item, "/files/notes.txt"), {"content": "y" * 2048}, HTTP_ACCEPT="text/html", HTTP_X_USER_ID="alice"
    )

    # Then the page answers 507, and its one line records the code and the disk dimension
    assert response.status_code == 507
    [line] = _lines(request_log)
    assert (line["status"], line["error"], line["dimension"]) == (507, "workspace_quota_exceeded", "disk")
    assert _django_levels(request_log) == [logging.WARNING]


@pytest.mark.urls("tests.ops.error_urls")
@pytest.mark.parametrize(("path", "status"), [("/test-errors/crash", 500), ("/test-errors/api/Unavailable", 503)])
def test_a_fault_of_the_server_is_still_an_error_of_django(request_log, path: str, status: int) -> None:
    # Given a page that crashes, and an API whose backend does not answer
    program = Client(raise_request_exception=False)

    # When a program calls it
    response = program.get(path, HTTP_ACCEPT="application/json")

    # Then Django logs it as an error, and the request log records its status
    assert response.status_code == status
    assert logging.ERROR in _django_levels(request_log)
    assert _lines(request_log)[-1]["status"] == status

"""Bodies built to crash the server: nested past any sane depth, or larger than a request may be.
Each is a clear 400 or 413 with an error code, and nothing is stored (issue 12 attack pass)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from collab.models import ApiToken
from crudgen.models import StoredResource
from crudgen.parsers import MAX_JSON_DEPTH, json_problem, loads_bounded
from knowledge.models import Collection
from quotas.models import SandboxActivity
from workspace.items.models import Item

pytestmark = pytest.mark.django_db

ENDPOINTS = [
    ("/me/tokens", "application/json"),
    ("/api/v1/workflow", "application/json"),
    ("/a/notebook/items", "application/json"),
    ("/kb/collections", "application/json"),
    ("/me/resources/handovers/1/accept", "application/json"),
    ("/notifications/read-all", "application/json"),
]


def _stored() -> tuple[int, int, int, int]:
    return (ApiToken.objects.count(), StoredResource.objects.count(), Item.objects.count(), Collection.objects.count())


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(("path", "content_type"), ENDPOINTS)
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 100_000])
def test_a_body_nested_too_deep_is_400_and_stores_nothing(alice_api: APIClient, path, content_type, depth):
    # Given the service; When a client sends a JSON body nested past the limit
    before = _stored()
    response = alice_api.generic("POST", path, _nested(depth), content_type=content_type)
    # Then it is a 400 saying so, never a RecursionError, and nothing is stored
    assert response.status_code == 400
    assert response.json()["error"] == "malformed_request"
    assert "nested" in response.json()["detail"]
    assert _stored() == before


def test_a_json_patch_nested_too_deep_is_400_and_changes_nothing(alice_api: APIClient):
    # Given alice's workflow
    rid = alice_api.post("/api/v1/workflow", {"name": "n", "steps": []}, format="json").json()["resource_id"]
    value = _nested(5_000)
    # When she sends a patch whose value is nested five thousand deep
    response = alice_api.generic(
        "PATCH",
        f"/api/v1/workflow/{rid}",
        f'[{{"op": "add", "path": "/description", "value": {value}}}]',
        content_type="application/json-patch+json",
    )
    # Then it is 400 and the workflow keeps its one revision
    assert response.status_code == 400
    assert alice_api.get(f"/api/v1/workflow/{rid}/revision-list").json()["total"] == 1


@pytest.mark.parametrize("path", [path for path, _ in ENDPOINTS])
def test_a_body_larger_than_the_request_limit_is_413_json(alice_api: APIClient, settings, path):
    # Given a 1 MiB request limit; When a client sends two
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
    before = _stored()
    body = '{"name": "' + "x" * (2 * 1024 * 1024) + '"}'
    response = alice_api.generic("POST", path, body, content_type="application/json")
    # Then it is 413 with an error code, and nothing is stored
    assert response.status_code == 413
    assert response.json()["error"] == "body_too_large"
    assert _stored() == before


def test_a_browser_sending_too_much_gets_the_sites_page(client, settings):
    # Given a 1 MiB request limit; When a browser posts two to a page
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
    response = client.post(
        "/kb/collections", {"name": "x" * (2 * 1024 * 1024)}, HTTP_ACCEPT="text/html", HTTP_X_USER_ID="alice"
    )
    # Then it is the site's own page, not Django's bare one
    assert response.status_code == 413
    assert "That request could not be taken" in response.content.decode()


@pytest.mark.parametrize("path", [path for path, _ in ENDPOINTS])
def test_a_body_holding_a_lone_surrogate_is_400_and_stores_nothing(alice_api: APIClient, path):
    # Found attacking the API: a lone surrogate (valid JSON, not text) cannot be stored or answered
    # in UTF-8, and crudgen's validation, exec and the agent's messages answered 500.
    # Given a body whose strings hold half of a surrogate pair
    before = _stored()
    body = '{"name": "\\ud800", "title": "\\ud800", "steps": ["echo \\ud800"], "owner": "alice"}'

    # When a client sends it
    response = alice_api.generic("POST", path, body, content_type="application/json")

    # Then it is 400 malformed_request, and nothing is stored
    assert (response.status_code, response.json()["error"]) == (400, "malformed_request")
    assert _stored() == before


def test_a_command_holding_a_lone_surrogate_is_400_and_runs_nothing(alice_api: APIClient, make_item):
    # Given alice's notebook
    item = make_item(created_by="alice")

    # When she sends a command holding half of a surrogate pair
    body = '{"command": "echo \\udfff"}'
    response = alice_api.generic("POST", f"/a/notebook/items/{item.pk}/exec", body, content_type="application/json")

    # Then it is 400 malformed_request, and no sandbox was opened for it
    assert (response.status_code, response.json()["error"]) == (400, "malformed_request")
    assert not SandboxActivity.objects.exists()


def test_bodies_within_the_depth_limit_are_read_as_before():
    # Given a body exactly at the limit and one past it
    at_limit, past = _nested(MAX_JSON_DEPTH), _nested(MAX_JSON_DEPTH + 1)
    # When each is read
    # Then the first is accepted and the second refused, without recursion in the check
    assert isinstance(loads_bounded(at_limit), list)
    with pytest.raises(ValueError, match="nested"):
        loads_bounded(past)
    assert json_problem({"a": [{"b": [1, 2, {"c": 3}]}]}, limit=5) is None
    assert json_problem({"a": [{"b": [1, 2, {"c": [3]}]}]}, limit=5) == "is nested deeper than 5 levels"

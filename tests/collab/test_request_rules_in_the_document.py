"""The service's document says what its serializers refuse in a request (issue 46.1): a field that
may not be blank has a minLength and a pattern, a list that may not be empty a minItems, and a
PATCH body's required fields stay required (no view validates a PATCH partially)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.conf import settings
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def components() -> dict:
    response = APIClient().get("/api/schema", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()["components"]["schemas"]


def test_a_field_that_may_not_be_blank_says_so_in_the_document(components: dict) -> None:
    # Given the service's document
    # When a token's name (a CharField that may not be blank) is read
    name = components["ApiTokenCreateInput"]["properties"]["name"]
    # Then it needs a character besides whitespace and holds no NUL
    assert name["minLength"] == 1
    assert name["pattern"] == "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"


def test_a_list_that_may_not_be_empty_says_so_in_the_document(components: dict) -> None:
    # Given the service's document
    # When a chat's collections are read
    collection_ids = components["KbChatCreateInput"]["properties"]["collection_ids"]
    # Then at least one is needed
    assert collection_ids["minItems"] == 1


def test_a_patch_body_keeps_its_required_fields_in_the_document(components: dict) -> None:
    # Given the service's document
    # When the body of a chat's rename (a PATCH) is read
    rename = components["KbChatRenameInput"]
    # Then its title is required, as the view requires it
    assert rename["required"] == ["title"]
    assert "PatchedKbChatRenameInput" not in components


def test_the_document_says_the_bounds_the_services_check(components: dict) -> None:
    # Given the service's document
    # When an exec's body, a file batch and a workflow's create body are read
    timeout = components["ExecInput"]["properties"]["timeout"]
    batch_ops = components["FileBatchInput"]["properties"]["operations"]["items"]["anyOf"]
    workflow = components["WorkflowRequest"]["properties"]
    # Then each says what its service refuses
    assert (timeout["minimum"], timeout["exclusiveMinimum"], timeout["maximum"]) == (0, True, 600)
    assert {op["properties"]["op"]["enum"][0] for op in batch_ops} == {"copy", "replace", "stage"}
    assert (workflow["every_seconds"]["minimum"], workflow["every_seconds"]["maximum"]) == (60, 31 * 24 * 3600)
    assert workflow["steps"]["maxItems"] == settings.WORKSPACE_WORKFLOW_MAX_STEPS


@pytest.mark.parametrize("name", [12, 1.5, True, ["a"]])
def test_a_json_value_of_another_type_than_the_documented_text_is_refused(
    api_client_for: Callable[[str], APIClient], name: object
) -> None:
    # Given alice
    client = api_client_for("alice")
    # When she names a new token with a JSON value that is not a string
    answer = client.post("/me/tokens", {"name": name}, format="json")
    # Then it is a 400 naming the field, not a token named "12"
    assert answer.status_code == 400
    assert answer.json()["error"] == "validation_error"
    assert "name" in answer.json()["fields"]


def test_a_query_string_is_still_parsed_from_its_text(api_client_for: Callable[[str], APIClient]) -> None:
    # Given alice
    client = api_client_for("alice")
    # When she reads her items with a numeric limit, which a query can only send as text
    answer = client.get("/a/notebook/items?limit=5")
    # Then it is taken
    assert answer.status_code == 200


def test_a_body_that_refuses_unknown_fields_says_so_in_the_document(components: dict) -> None:
    # Given the service's document
    # When a person's override body (which refuses a field it does not know) is read
    override = components["UserResourceOverrideInput"]
    # Then it allows no other property, and each value says its forms (a number, a string, null)
    assert override["additionalProperties"] is False
    assert len(override["properties"]["memory"]["anyOf"]) == 3


def test_an_empty_notification_kind_is_every_kind_as_documented(api_client_for: Callable[[str], APIClient]) -> None:
    # Given alice
    client = api_client_for("alice")
    # When she reads her notifications with `kind=` (what the page's "all kinds" sends)
    answer = client.get("/notifications?kind=")
    # Then it is taken, as the document's enum (with "") says
    assert answer.status_code == 200

"""Every create answers with the address of what it made in `Location`, and that address answers a
GET for its creator (issue 29.3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def _followed(api: APIClient, response: Any, status: int) -> dict:
    assert response.status_code == status, response.content
    location = response["Location"]
    followed = api.get(location)
    assert followed.status_code == 200, (location, followed.content)
    return followed.json()


def test_creating_an_item_answers_its_address(alice_api: APIClient) -> None:
    # Given alice; When she creates a notebook
    response = alice_api.post("/a/notebook/items", {"title": "Scratch"}, format="json")
    # Then Location names it
    assert _followed(alice_api, response, 201)["title"] == "Scratch"


def test_creating_an_investigation_answers_its_address(alice_api: APIClient) -> None:
    # Given alice; When she opens an investigation
    response = alice_api.post("/investigations", {"title": "Disk alerts"}, format="json")
    # Then Location names it
    assert _followed(alice_api, response, 201)["title"] == "Disk alerts"


def test_creating_a_collection_a_chat_and_a_copy_answers_their_addresses(alice_api: APIClient) -> None:
    # Given alice's new collection
    collection = _followed(alice_api, alice_api.post("/kb/collections", {"name": "Runbooks"}, format="json"), 201)
    # When she opens a chat over it and copies the chat
    chat = alice_api.post("/kb/chats", {"title": "Q", "collection_ids": [collection["id"]]}, format="json")
    chat_body = _followed(alice_api, chat, 201)
    copy = alice_api.post(f"/kb/chats/{chat_body['id']}/copy", {"title": "Q again"}, format="json")
    # Then each answer's Location opens what it made
    assert chat_body["title"] == "Q"
    assert _followed(alice_api, copy, 201)["title"] == "Q again"


def test_an_upload_answers_the_address_of_its_document(
    alice_api: APIClient, make_collection: Callable[..., Any], django_capture_on_commit_callbacks: Any
) -> None:
    # Given alice's collection; When she uploads a file
    collection = make_collection()
    with django_capture_on_commit_callbacks(execute=False):
        response = alice_api.post(
            f"/kb/collections/{collection.id}/documents",
            {"file": SimpleUploadedFile("notes.md", b"# Notes\n\nSome text.", content_type="text/markdown")},
            format="multipart",
        )
    # Then the 202 names the document, whose status says when it is ingested
    assert _followed(alice_api, response, 202)["status"] == "pending"


def test_creating_a_token_answers_its_address(bob_api: APIClient) -> None:
    # Given bob; When he creates a token
    response = bob_api.post("/me/tokens", {"name": "backup"}, format="json")
    # Then Location names it (revoking it there with DELETE)
    assert response.status_code == 201
    assert response["Location"] == f"/me/tokens/{response.json()['id']}"
    assert bob_api.delete(response["Location"]).status_code == 200


def test_creating_a_workflow_answers_its_address(alice_api: APIClient) -> None:
    # Given alice; When she creates a workflow on the generated route
    response = alice_api.post("/api/v1/workflow", {"name": "nightly", "steps": ["true"]}, format="json")
    # Then Location is the resource's own address, which reads its data
    assert response["Location"] == f"/api/v1/workflow/{response.json()['resource_id']}"
    assert _followed(alice_api, response, 201)["name"] == "nightly"

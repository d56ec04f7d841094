"""The service's `workflow` resource under /api/v1/: DjangoStorage, dash names, full tracking."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from crudgen import DjangoStorage
from crudgen.models import StoredResource
from workspace.workflows.generated import Workflow, system

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.workflows.generated_urls")]

BODY = {"name": "nightly", "steps": ["make test"], "every_seconds": 3600}


def test_workflow_is_registered_singular_on_django_storage() -> None:
    # Given the service's CRUD system
    # When the workflow resource is looked up
    crud = system.get_crud(Workflow)
    # Then it is named workflow, singular, and stored in the Django database
    assert crud.resource_name == "workflow"
    assert isinstance(crud.storage, DjangoStorage)


def test_creating_a_workflow_records_the_caller_as_creator(alice_api: APIClient) -> None:
    # Given alice, with no workflow yet
    # When she creates a workflow
    response = alice_api.post("/api/v1/workflow", BODY, format="json")
    # Then it is 201, and both the answer and the stored row name her as creator
    assert response.status_code == 201
    assert response.json()["created_by"] == "alice"
    assert StoredResource.objects.get(namespace="workflow").created_by == "alice"


def test_defaults_fill_optional_workflow_fields(alice_api: APIClient) -> None:
    # Given alice's workflow created with a name and steps only
    # When its data is read
    rid = alice_api.post("/api/v1/workflow", {"name": "n", "steps": []}, format="json").json()["resource_id"]
    # Then the optional fields hold their defaults
    assert alice_api.get(f"/api/v1/workflow/{rid}/data").json() == {
        "name": "n",
        "steps": [],
        "description": "",
        "item_id": None,
        "every_seconds": None,
        "enabled": True,
    }


def test_editing_keeps_revisions_and_switching_back_rolls_back(
    settings, alice_api: APIClient, bob_api: APIClient
) -> None:
    # Given bob's workflow, edited by alice (staff)
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    created = bob_api.post("/api/v1/workflow", BODY, format="json").json()
    rid = created["resource_id"]
    edit = alice_api.patch(
        f"/api/v1/workflow/{rid}", [{"op": "add", "path": "/steps/-", "value": "deploy"}], format="json"
    )
    assert edit.json()["updated_by"] == "alice"
    # When bob switches back to his first revision
    bob_api.post(f"/api/v1/workflow/{rid}/switch/{created['current_revision_id']}")
    # Then his steps are current again and both revisions are kept
    assert bob_api.get(f"/api/v1/workflow/{rid}/data").json()["steps"] == ["make test"]
    assert bob_api.get(f"/api/v1/workflow/{rid}/revision-list").json()["total"] == 2


def test_a_workflow_without_steps_is_refused(alice_api: APIClient) -> None:
    # Given alice, and steps that every workflow needs
    # When she creates a workflow without steps
    response = alice_api.post("/api/v1/workflow", {"name": "n"}, format="json")
    # Then it is 422 naming the missing field, and nothing is stored
    assert response.status_code == 422
    assert response.json()["fields"] == {"steps": "field required"}
    assert StoredResource.objects.count() == 0


def test_listing_workflows_is_bounded_in_queries(alice_api: APIClient, django_assert_max_num_queries) -> None:
    # Given twenty-five of alice's workflows
    for index in range(25):
        alice_api.post("/api/v1/workflow", {**BODY, "name": f"w{index}"}, format="json")
    # When she lists their data
    with django_assert_max_num_queries(2):
        body = alice_api.get("/api/v1/workflow/data").json()
    # Then the first page of twenty comes back, counting all twenty-five, in a bounded number of queries
    assert (body["total"], len(body["items"])) == (25, 20)


def test_admin_shows_resources_read_only() -> None:
    from django.contrib import admin

    from crudgen.models import StoredRevision

    # Given Django admin's pages for stored resources and their revisions
    # When each is asked what it allows / Then it refuses adding, changing and deleting
    for model in (StoredResource, StoredRevision):
        model_admin = admin.site._registry[model]
        assert model_admin.has_add_permission(None) is False
        assert model_admin.has_change_permission(None) is False
        assert model_admin.has_delete_permission(None) is False


@pytest.mark.postgres(reason="SQLite stores NUL characters; only PostgreSQL refuses them")
def test_a_nul_character_in_a_filter_is_422_not_a_server_error(alice_api: APIClient) -> None:
    # Found while fuzzing on PostgreSQL, which cannot hold NUL in text: it was a 500.
    # Given PostgreSQL, which cannot store a NUL character

    # When alice filters workflows by a creator whose name holds one
    response = alice_api.get("/api/v1/workflow/meta", {"created_by": "a\x00b"})

    # Then it is 422 validation_error, not a server error
    assert response.status_code == 422
    assert response.json()["error"] == "validation_error"


def test_counting_workflows_by_creator_answers_what_the_list_holds(settings, make_workflow, api_client_for) -> None:
    # Given staff (who see everyone's workflows), two workflows of bob and one of carol
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    for creator in ("bob", "bob", "carol"):
        make_workflow(["true"], user=creator)
    staff = api_client_for("alice")
    # When staff count and list them by creator, one key repeated and the comma form
    for query in ("created_by=carol", "created_by=bob&created_by=carol", "created_by=bob,carol", "created_by=dave"):
        counted = staff.get(f"/api/v1/workflow/count?{query}").json()["count"]
        listed = staff.get(f"/api/v1/workflow/meta?{query}").json()["total"]
        # Then the count is the list's total each time, not the unfiltered three
        assert counted == listed == {"created_by=carol": 1, "created_by=dave": 0}.get(query, 3)

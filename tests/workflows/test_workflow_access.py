"""`/api/v1/workflow` is private to each workflow's creator and staff, and names only usable items."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from collab.actor import Actor
from crudgen.models import StoredResource, StoredRevision
from workspace.investigations.services import investigation_create
from workspace.items.models import Item

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.workflows.generated_urls")]

BODY = {"name": "nightly", "steps": ["make test"]}

ROUTES_OF_ONE_WORKFLOW = [
    ("get", "/api/v1/workflow/{rid}/data", None),
    ("get", "/api/v1/workflow/{rid}/meta", None),
    ("get", "/api/v1/workflow/{rid}/full", None),
    ("get", "/api/v1/workflow/{rid}", None),
    ("get", "/api/v1/workflow/{rid}/revision-list", None),
    ("put", "/api/v1/workflow/{rid}", {"name": "mine now", "steps": ["id"]}),
    ("patch", "/api/v1/workflow/{rid}", [{"op": "replace", "path": "/steps", "value": ["cat /etc/passwd"]}]),
    ("delete", "/api/v1/workflow/{rid}", None),
    ("post", "/api/v1/workflow/{rid}/restore", None),
    ("post", "/api/v1/workflow/{rid}/switch/{rid}:1", None),
]


def _send(client: APIClient, method: str, path: str, body: Any) -> Any:
    if method == "patch":
        return client.patch(path, json.dumps(body), content_type="application/json-patch+json")
    if body is None:
        return getattr(client, method)(path)
    return getattr(client, method)(path, body, format="json")


def _snapshot() -> list[tuple]:
    resources = list(StoredResource.objects.order_by("pk").values_list("current_revision_id", "is_deleted", "data"))
    return [*resources, StoredRevision.objects.count()]


@pytest.mark.parametrize(("method", "template", "body"), ROUTES_OF_ONE_WORKFLOW)
def test_a_stranger_gets_404_on_every_route_of_someone_elses_workflow_and_nothing_changes(
    bob_api: APIClient, api_client_for: Callable[[str], APIClient], method: str, template: str, body: Any
) -> None:
    # Given bob's workflow
    rid = bob_api.post("/api/v1/workflow", BODY, format="json").json()["resource_id"]
    before = _snapshot()
    # When dave uses any route of it
    response = _send(api_client_for("dave"), method, template.format(rid=rid), body)
    # Then he gets the 404 of a missing workflow and nothing is stored
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert _snapshot() == before


def test_lists_and_counts_never_show_someone_elses_workflows(
    bob_api: APIClient, api_client_for: Callable[[str], APIClient], django_assert_max_num_queries
) -> None:
    # Given three workflows of bob and one of carol
    for index in range(3):
        bob_api.post("/api/v1/workflow", {**BODY, "name": f"b{index}"}, format="json")
    carol = api_client_for("carol")
    carol.post("/api/v1/workflow", {**BODY, "name": "c"}, format="json")
    # When carol lists every shape and counts, in a bounded number of queries
    with django_assert_max_num_queries(2):
        page = carol.get("/api/v1/workflow/meta").json()
    names = {
        path: [i.get("name") for i in carol.get(path).json()["items"]]
        for path in ("/api/v1/workflow/data", "/api/v1/workflow")
    }
    count = carol.get("/api/v1/workflow/count").json()["count"]
    # Then she sees only hers
    assert (page["total"], [i["created_by"] for i in page["items"]]) == (1, ["carol"])
    assert names == {"/api/v1/workflow/data": ["c"], "/api/v1/workflow": ["c"]}
    assert count == 1


def test_filtering_on_an_item_lists_only_the_callers_workflows_of_that_item(
    bob_api: APIClient,
    api_client_for: Callable[[str], APIClient],
    make_item: Callable[..., Item],
    django_assert_max_num_queries,
) -> None:
    # Given two workflows of bob on his item, one on another item, and one of carol naming no item
    item, other = make_item(created_by="bob"), make_item(created_by="bob")
    for name, item_id in (("b1", item.pk), ("b2", item.pk), ("b3", other.pk)):
        bob_api.post("/api/v1/workflow", {**BODY, "name": name, "item_id": str(item_id)}, format="json")
    carol = api_client_for("carol")
    carol.post("/api/v1/workflow", {**BODY, "name": "c"}, format="json")
    # When bob and carol filter on bob's item (an indexed field), in a bounded number of queries
    with django_assert_max_num_queries(2):
        mine = bob_api.get(f"/api/v1/workflow/data?item_id={item.pk}").json()
    hers = carol.get(f"/api/v1/workflow/data?item_id={item.pk}").json()
    counted = carol.get(f"/api/v1/workflow/count?item_id={item.pk}").json()["count"]
    # Then bob gets his two, and carol learns nothing about bob's
    assert sorted(i["name"] for i in mine["items"]) == ["b1", "b2"]
    assert (hers["total"], hers["items"], counted) == (0, [], 0)


def test_staff_list_and_change_everyones_workflows(settings, alice_api: APIClient, bob_api: APIClient) -> None:
    # Given bob's workflow, and alice staff
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    rid = bob_api.post("/api/v1/workflow", BODY, format="json").json()["resource_id"]
    # When alice (staff) lists and edits it
    listed = alice_api.get("/api/v1/workflow/meta").json()
    edited = alice_api.put(f"/api/v1/workflow/{rid}", {**BODY, "name": "fixed"}, format="json")
    # Then she sees it and her edit is stored
    assert [item["resource_id"] for item in listed["items"]] == [rid]
    assert edited.status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/api/v1/workflow", {**BODY, "item_id": "{item}"}),
        ("put", "/api/v1/workflow/{rid}", {**BODY, "item_id": "{item}"}),
        ("patch", "/api/v1/workflow/{rid}", [{"op": "replace", "path": "/item_id", "value": "{item}"}]),
    ],
)
def test_naming_an_item_the_caller_may_not_use_is_400_and_nothing_is_stored(
    api_client_for: Callable[[str], APIClient], make_item: Callable[..., Item], method: str, path: str, body: Any
) -> None:
    # Given alice's private item and a workflow of dave's
    item = make_item(created_by="alice")
    dave = api_client_for("dave")
    rid = dave.post("/api/v1/workflow", BODY, format="json").json()["resource_id"]
    before = _snapshot()
    # When dave points a workflow at alice's item
    filled = json.loads(json.dumps(body).replace("{item}", str(item.pk)))
    response = _send(dave, method, path.format(rid=rid), filled)
    # Then it is refused saying which field, and nothing is stored
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_item_id"
    assert response.json()["fields"] == {"item_id": "no such item, or not yours"}
    assert _snapshot() == before


@pytest.mark.parametrize("item_id", ["999999", "abc", "-1", "1e3", "9" * 40])
def test_an_item_id_that_names_no_item_is_400(bob_api: APIClient, item_id: str) -> None:
    # Given no such item; When bob names it
    response = bob_api.post("/api/v1/workflow", {**BODY, "item_id": item_id}, format="json")
    # Then the workflow is refused and not stored
    assert response.status_code == 400
    assert StoredResource.objects.count() == 0


def test_a_caller_may_name_their_own_item_and_an_investigation_they_are_member_of(
    bob_api: APIClient, make_item: Callable[..., Item]
) -> None:
    # Given bob's own item and alice's investigation with bob as a member
    own = make_item(created_by="bob")
    investigation = investigation_create(title="outage", actor=Actor("alice"), members=["bob"]).item
    # When bob names each
    answers = [
        bob_api.post("/api/v1/workflow", {**BODY, "item_id": str(item.pk)}, format="json").status_code
        for item in (own, investigation)
    ]
    # Then both are stored
    assert answers == [201, 201]


def test_staff_may_name_any_item(settings, alice_api: APIClient, make_item: Callable[..., Item]) -> None:
    # Given bob's item and alice staff; When alice names it
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    response = alice_api.post(
        "/api/v1/workflow", {**BODY, "item_id": str(make_item(created_by="bob").pk)}, format="json"
    )
    # Then it is stored
    assert response.status_code == 201

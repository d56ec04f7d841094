"""The access hook: a policy scopes every list and count and decides each read and write (docs/ARCHITECTURE.md §7)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from crudgen import (
    AccessAction,
    AccessPolicy,
    Actor,
    CreatorOnly,
    CrudError,
    CRUDSystem,
    MetadataConfig,
    NotFoundError,
    PlainActor,
    RouteConfig,
)
from crudgen.storage.base import Storage
from tests.crudgen.conftest import Clock, Workflow

pytestmark = pytest.mark.django_db

ROUTES_OF_ONE_RESOURCE = [
    ("get", "/api/workflow/{rid}/data", None),
    ("get", "/api/workflow/{rid}/meta", None),
    ("get", "/api/workflow/{rid}/full", None),
    ("get", "/api/workflow/{rid}", None),
    ("get", "/api/workflow/{rid}/revision-list", None),
    ("put", "/api/workflow/{rid}", {"name": "taken", "steps": []}),
    ("patch", "/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "taken"}]),
    ("delete", "/api/workflow/{rid}", None),
    ("post", "/api/workflow/{rid}/restore", None),
    ("post", "/api/workflow/{rid}/switch/{rid}:1", None),
]


class NoDeploys(AccessPolicy):
    """Everyone may do everything, except store a workflow named `deploy`."""

    def check_data(self, actor: Actor, data: dict[str, Any]) -> None:
        if data.get("name") == "deploy":
            raise NoDeploysError("deploy workflows are not allowed here")


class NoDeploysError(CrudError):
    status_code = 400
    code = "deploys_forbidden"


def _private_system(storage_factory: Callable[[str], Storage], clock: Clock, policy: AccessPolicy) -> CRUDSystem:
    return CRUDSystem(
        storage_factory=storage_factory,
        metadata_config=MetadataConfig.with_full_tracking(get_current_time=clock.now),
        use_plural=False,
        access_policy=policy,
    )


def _private_api(
    storage_factory: Callable[[str], Storage], clock: Clock, mount: Callable[..., None], policy: AccessPolicy
) -> APIClient:
    system = _private_system(storage_factory, clock, policy)
    system.register_model(Workflow)
    mount(system.create_router("/api", RouteConfig()))
    return APIClient()


@pytest.fixture
def private_api(storage_factory: Callable[[str], Storage], clock: Clock, mount: Callable[..., None]) -> APIClient:
    """Workflows private to their creator; staff (alice in the mock directory) see all of them."""
    policy = CreatorOnly(sees_everything=lambda actor: actor.is_staff)
    return _private_api(storage_factory, clock, mount, policy)


def _create(api: APIClient, user: str, name: str) -> str:
    response = api.post("/api/workflow", {"name": name, "steps": ["true"]}, format="json", HTTP_X_USER_ID=user)
    assert response.status_code == 201, response.content
    return response.json()["resource_id"]


@pytest.mark.parametrize(("method", "template", "body"), ROUTES_OF_ONE_RESOURCE)
def test_a_stranger_gets_404_on_every_route_of_a_private_resource_and_nothing_changes(
    private_api: APIClient, method: str, template: str, body: Any
) -> None:
    # Given bob's private workflow
    rid = _create(private_api, "bob", "build")
    before = private_api.get(f"/api/workflow/{rid}/full", HTTP_X_USER_ID="bob").json()
    # When dave, who did not create it, uses any route of it
    kwargs: dict[str, Any] = {"HTTP_X_USER_ID": "dave"}
    if body is not None:
        kwargs.update(data=body, format="json")
    if method == "patch":
        kwargs["content_type"] = "application/json-patch+json"
        kwargs.pop("format")
        kwargs["data"] = json.dumps(body)
    response = getattr(private_api, method)(template.format(rid=rid), **kwargs)
    # Then the answer is the 404 of a missing resource, and bob's workflow is as it was
    assert response.status_code == 404, response.content
    assert response.json()["error"] == "not_found"
    assert private_api.get(f"/api/workflow/{rid}/full", HTTP_X_USER_ID="bob").json() == before


def test_a_stranger_cannot_tell_a_deleted_private_resource_from_a_missing_one(private_api: APIClient) -> None:
    # Given bob's workflow, deleted
    rid = _create(private_api, "bob", "build")
    assert private_api.delete(f"/api/workflow/{rid}", HTTP_X_USER_ID="bob").status_code == 200
    # When dave reads its data
    response = private_api.get(f"/api/workflow/{rid}/data", HTTP_X_USER_ID="dave")
    # Then he gets 404, not the 410 its creator gets
    assert response.status_code == 404
    assert private_api.get(f"/api/workflow/{rid}/data", HTTP_X_USER_ID="bob").status_code == 410


def test_the_creator_uses_every_route_of_their_resource(private_api: APIClient) -> None:
    # Given bob's workflow
    rid = _create(private_api, "bob", "build")
    headers = {"HTTP_X_USER_ID": "bob"}
    # When bob edits, deletes, restores and switches it back
    replaced = private_api.put(f"/api/workflow/{rid}", {"name": "b2", "steps": []}, format="json", **headers)
    deleted = private_api.delete(f"/api/workflow/{rid}", **headers)
    restored = private_api.post(f"/api/workflow/{rid}/restore", **headers)
    switched = private_api.post(f"/api/workflow/{rid}/switch/{rid}:1", **headers)
    # Then every step works and the first revision is current again
    assert [r.status_code for r in (replaced, deleted, restored, switched)] == [200, 200, 200, 200]
    assert private_api.get(f"/api/workflow/{rid}/data", **headers).json()["name"] == "build"
    assert private_api.get(f"/api/workflow/{rid}/revision-list", **headers).json()["total"] == 2


@pytest.mark.parametrize("path", ["/api/workflow/data", "/api/workflow/meta", "/api/workflow/full", "/api/workflow"])
def test_lists_show_a_caller_only_what_the_policy_lets_them_see(private_api: APIClient, path: str) -> None:
    # Given two workflows of bob and one of carol
    _create(private_api, "bob", "b1")
    _create(private_api, "bob", "b2")
    _create(private_api, "carol", "c1")
    # When bob lists, asking even for carol's with a filter
    mine = private_api.get(path, HTTP_X_USER_ID="bob").json()
    hers = private_api.get(f"{path}?created_by=carol", HTTP_X_USER_ID="bob").json()
    # Then the page and its total hold only his
    assert (mine["total"], len(mine["items"])) == (2, 2)
    assert (hers["total"], hers["items"]) == (0, [])


def test_counts_are_scoped_like_lists(private_api: APIClient) -> None:
    # Given two workflows of bob and one of carol
    _create(private_api, "bob", "b1")
    _create(private_api, "bob", "b2")
    _create(private_api, "carol", "c1")
    # When bob, carol and staff count
    counts = {
        user: private_api.get("/api/workflow/count", HTTP_X_USER_ID=user).json()["count"]
        for user in ("bob", "carol", "alice")
    }
    # Then each counts what they may see
    assert counts == {"bob": 2, "carol": 1, "alice": 3}


def test_staff_named_by_the_policy_see_and_change_everything(private_api: APIClient) -> None:
    # Given bob's workflow
    rid = _create(private_api, "bob", "build")
    # When alice (staff) lists and edits it
    listed = private_api.get("/api/workflow/meta", HTTP_X_USER_ID="alice").json()
    edited = private_api.put(
        f"/api/workflow/{rid}", {"name": "fixed", "steps": []}, format="json", HTTP_X_USER_ID="alice"
    )
    # Then she sees it and her edit is stored
    assert [item["resource_id"] for item in listed["items"]] == [rid]
    assert edited.status_code == 200


def test_without_a_policy_the_routes_stay_open(api: APIClient) -> None:
    # Given bob's workflow on a system that sets no policy
    response = api.post("/api/workflow", {"name": "build", "steps": []}, format="json", HTTP_X_USER_ID="bob")
    rid = response.json()["resource_id"]
    # When dave reads and lists
    read = api.get(f"/api/workflow/{rid}/data", HTTP_X_USER_ID="dave")
    listed = api.get("/api/workflow/meta", HTTP_X_USER_ID="dave").json()
    # Then he sees it, as before the hook existed
    assert read.status_code == 200
    assert listed["total"] == 1


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/api/workflow", {"name": "deploy", "steps": []}),
        ("put", "/api/workflow/{rid}", {"name": "deploy", "steps": []}),
        ("patch", "/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "deploy"}]),
    ],
)
def test_data_the_policy_refuses_is_answered_with_its_error_and_not_stored(
    storage_factory: Callable[[str], Storage],
    clock: Clock,
    mount: Callable[..., None],
    method: str,
    path: str,
    body: Any,
) -> None:
    # Given an open system whose policy refuses workflows named deploy, and one workflow
    api = _private_api(storage_factory, clock, mount, NoDeploys())
    rid = _create(api, "bob", "build")
    # When a write would store a workflow named deploy
    if method == "patch":
        response = api.patch(path.format(rid=rid), json.dumps(body), content_type="application/json-patch+json")
    else:
        response = getattr(api, method)(path.format(rid=rid), body, format="json")
    # Then the policy's error is the answer and nothing new is stored
    assert response.status_code == 400
    assert response.json()["error"] == "deploys_forbidden"
    assert api.get("/api/workflow/count").json()["count"] == 1
    assert api.get(f"/api/workflow/{rid}/revision-list").json()["total"] == 1


def test_switching_back_to_data_the_policy_now_refuses_is_refused(
    storage_factory: Callable[[str], Storage], clock: Clock, mount: Callable[..., None]
) -> None:
    # Given a workflow first named deploy (before the rule), then renamed, under a policy that refuses deploy
    class Later(NoDeploys):
        active = False

        def check_data(self, actor: Actor, data: dict[str, Any]) -> None:
            if self.active:
                super().check_data(actor, data)

    policy = Later()
    api = _private_api(storage_factory, clock, mount, policy)
    rid = _create(api, "bob", "deploy")
    api.put(f"/api/workflow/{rid}", {"name": "safe", "steps": []}, format="json")
    policy.active = True
    # When someone switches back to the first revision
    response = api.post(f"/api/workflow/{rid}/switch/{rid}:1")
    # Then the switch is refused and the current revision stays
    assert response.status_code == 400
    assert api.get(f"/api/workflow/{rid}/data").json()["name"] == "safe"


def test_a_data_check_set_on_the_policy_instance_also_guards_a_switch(
    storage_factory: Callable[[str], Storage], clock: Clock, mount: Callable[..., None]
) -> None:
    # Given an open policy whose data check is set on the instance (not in a subclass), at first letting all through
    policy = AccessPolicy()
    policy.check_data = lambda actor, data: None  # type: ignore[method-assign]
    api = _private_api(storage_factory, clock, mount, policy)
    rid = _create(api, "bob", "deploy")
    api.put(f"/api/workflow/{rid}", {"name": "safe", "steps": []}, format="json")
    policy.check_data = NoDeploys().check_data  # type: ignore[method-assign]
    # When someone switches back to the revision the check now refuses
    response = api.post(f"/api/workflow/{rid}/switch/{rid}:1")
    # Then the switch is refused and the current revision stays
    assert response.status_code == 400
    assert response.json()["error"] == "deploys_forbidden"
    assert api.get(f"/api/workflow/{rid}/data").json()["name"] == "safe"


def test_a_policy_sees_the_action_of_each_route(
    storage_factory: Callable[[str], Storage], clock: Clock, mount: Callable[..., None]
) -> None:
    # Given a policy that records what it is asked
    asked: list[str] = []

    class Recording(AccessPolicy):
        def allows(self, actor: Actor, action: AccessAction, meta: Any) -> bool:
            asked.append(str(action))
            return True

    api = _private_api(storage_factory, clock, mount, Recording())
    rid = _create(api, "bob", "build")
    # When each kind of route is used once
    api.get(f"/api/workflow/{rid}/data")
    api.patch(
        f"/api/workflow/{rid}",
        '[{"op": "replace", "path": "/name", "value": "x"}]',
        content_type="application/json-patch+json",
    )
    api.put(f"/api/workflow/{rid}", {"name": "y", "steps": []}, format="json")
    api.delete(f"/api/workflow/{rid}")
    api.post(f"/api/workflow/{rid}/restore")
    api.post(f"/api/workflow/{rid}/switch/{rid}:1")
    api.get(f"/api/workflow/{rid}/revision-list")
    # Then it was asked about each action by name
    assert asked == ["read", "patch", "update", "delete", "restore", "switch", "read_revisions"]


def test_the_schema_lists_the_statuses_a_policy_may_refuse_data_with(mount: Callable[..., None]) -> None:
    # Given a system whose policy refuses some data with 400
    class Refusing(NoDeploys):
        data_refusal_statuses = (400,)

    system = CRUDSystem(use_plural=False, access_policy=Refusing())
    system.register_model(Workflow)
    mount(system.create_app(prefix="/api/v1"))
    # When the OpenAPI document is read
    schema = APIClient().get("/api/v1/openapi.json", HTTP_ACCEPT="application/json").json()
    # Then every write documents 400 and reads do not
    paths = schema["paths"]
    assert "400" in paths["/api/v1/workflow"]["post"]["responses"]
    assert "400" in paths["/api/v1/workflow/{resource_id}"]["put"]["responses"]
    assert "400" in paths["/api/v1/workflow/{resource_id}"]["patch"]["responses"]
    assert "400" not in paths["/api/v1/workflow/{resource_id}/data"]["get"]["responses"]


def test_code_off_the_request_path_asks_the_policy_for_an_actor_as_a_route_does(
    storage_factory: Callable[[str], Storage], clock: Clock
) -> None:
    # Given bob's workflow under a creator-only policy that lets staff see everything
    policy = CreatorOnly(sees_everything=lambda actor: actor.is_staff)
    workflows = _private_system(storage_factory, clock, policy).register_model(Workflow)
    rid = workflows.create({"name": "build", "steps": ["true"]}, user="bob")["resource_id"]
    # When a job reads it for dave, for bob and for a staff member, with no request at all
    as_dave = workflows.caller_for(PlainActor("dave"))
    # Then dave gets the 404 a route gives him, bob and staff read it, and a list is scoped the same way
    with pytest.raises(NotFoundError):
        workflows.read(rid, caller=as_dave)
    assert workflows.read(rid, caller=workflows.caller_for(PlainActor("bob"))).meta.created_by == "bob"
    assert workflows.read(rid, caller=workflows.caller_for(PlainActor("carol", is_staff=True))).meta.resource_id == rid
    assert as_dave.scope().created_by == frozenset({"dave"})

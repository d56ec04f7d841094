"""RouteConfig, RouteOptions (background tasks, status, dependencies) and route plugins."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from rest_framework.permissions import BasePermission
from rest_framework.test import APIClient, APIRequestFactory, force_authenticate

from crudgen import (
    BackgroundTaskMode,
    CRUDSystem,
    HTTPMethod,
    PluginManager,
    PluginRouteConfig,
    RouteConfig,
    RouteContext,
    RouteOptions,
)
from crudgen.plugins import RoutePlugin
from tests.crudgen.conftest import Workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def memory_system() -> CRUDSystem:
    crud_system = CRUDSystem(use_plural=False)
    crud_system.register_model(Workflow)
    return crud_system


def test_disabled_route_answers_405_where_the_path_serves_another_method(
    memory_system: CRUDSystem, mount: Callable[..., None]
) -> None:
    # Given routes with delete switched off
    mount(memory_system.create_router("", RouteConfig(delete=False)))
    rid = APIClient().post("/workflow", {"name": "w", "steps": []}, format="json").json()["resource_id"]
    # When a created workflow is deleted
    response = APIClient().delete(f"/workflow/{rid}")
    # Then the path still serves GET, so DELETE is 405 method_not_allowed
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"


def test_disabled_route_answers_404_where_nothing_else_serves_the_path(
    memory_system: CRUDSystem, mount: Callable[..., None]
) -> None:
    # Given routes with count switched off
    # When the count path is asked
    mount(memory_system.create_router("", RouteConfig(count=False)))
    # Then nothing serves it: 404
    assert APIClient().get("/workflow/count").status_code == 404


def test_route_options_disable_like_a_false(memory_system: CRUDSystem, mount: Callable[..., None]) -> None:
    # Given create switched off through RouteOptions
    # When a workflow is posted
    mount(memory_system.create_router("", RouteConfig(create=RouteOptions(enabled=False))))
    # Then the answer is 405
    assert APIClient().post("/workflow", {"name": "w", "steps": []}, format="json").status_code == 405


def test_background_task_runs_after_the_response_when_the_condition_holds(
    memory_system: CRUDSystem, mount: Callable[..., None]
) -> None:
    # Given routes whose tasks record the answer they get
    seen: list[str] = []
    config = RouteConfig.with_background_tasks(lambda body: seen.append(body["resource_id"]))
    mount(memory_system.create_router("", config))
    # When a workflow is created
    response = APIClient().post("/workflow", {"name": "w", "steps": []}, format="json")
    # Then the task saw its metadata
    assert seen == [response.json()["resource_id"]]


def test_background_task_is_skipped_when_the_condition_fails(
    memory_system: CRUDSystem, mount: Callable[..., None]
) -> None:
    # Given a create task whose condition is always false
    seen: list[dict] = []
    options = RouteOptions(
        background_task=BackgroundTaskMode.ENABLED,
        background_task_func=seen.append,
        background_task_condition=lambda body: False,
    )
    mount(memory_system.create_router("", RouteConfig(create=options)))
    # When a workflow is created
    response = APIClient().post("/workflow", {"name": "w", "steps": []}, format="json")
    # Then the create succeeds and the task did not run
    assert response.status_code == 201
    assert seen == []


def test_background_task_is_not_run_before_the_response_is_closed(memory_system: CRUDSystem) -> None:
    # Given routes with a recording task and an authenticated create request
    seen: list[dict] = []
    patterns = memory_system.create_router("", RouteConfig.with_background_tasks(seen.append))
    request = APIRequestFactory().post("/workflow", {"name": "w", "steps": []}, format="json")
    force_authenticate(request, user=User(username="alice"))
    # When the response is rendered, then closed
    response = patterns[0].callback(request)
    response.render()
    # Then the task runs only at close
    assert response.status_code == 201
    assert seen == []
    response.close()
    assert len(seen) == 1


def test_custom_status_code_replaces_the_default(memory_system: CRUDSystem, mount: Callable[..., None]) -> None:
    # Given create answering 202 through RouteOptions
    # When a workflow is posted
    mount(memory_system.create_router("", RouteConfig(create=RouteOptions(custom_status_code=202))))
    # Then the answer is 202
    assert APIClient().post("/workflow", {"name": "w", "steps": []}, format="json").status_code == 202


class OnlyBob(BasePermission):
    def has_permission(self, request, view) -> bool:
        return request.user.get_username() == "bob"


def test_permission_class_dependency_refuses_with_403(memory_system: CRUDSystem, mount: Callable[..., None]) -> None:
    # Given create guarded by a permission class that admits only bob
    mount(memory_system.create_router("", RouteConfig(create=RouteOptions(custom_dependencies=[OnlyBob]))))
    # When alice and bob post a workflow
    refused = APIClient().post("/workflow", {"name": "w", "steps": []}, format="json")
    allowed = APIClient().post("/workflow", {"name": "w", "steps": []}, format="json", HTTP_X_USER_ID="bob")
    # Then alice gets 403 permission_denied and bob 201
    assert (refused.status_code, refused.json()["error"]) == (403, "permission_denied")
    assert allowed.status_code == 201


def test_callable_dependency_returning_false_refuses(memory_system: CRUDSystem, mount: Callable[..., None]) -> None:
    # Given lists guarded by a callable that returns False
    # When the data list is read
    mount(memory_system.create_router("", RouteConfig(list=RouteOptions(custom_dependencies=[lambda request: False]))))
    # Then the answer is 403
    assert APIClient().get("/workflow/data").status_code == 403


def test_route_config_to_dict_names_every_route() -> None:
    # Given a RouteConfig with delete off and a custom create status
    config = RouteConfig(delete=False, create=RouteOptions(custom_status_code=202))
    # When it is turned into a dict
    as_dict = config.to_dict()
    # Then every route is named with its bool or options
    assert as_dict["delete"] is False
    assert as_dict["create"]["custom_status_code"] == 202
    assert set(as_dict) == {"create", "get", "update", "delete", "list", "count"}


def test_custom_plugin_route_is_served(memory_system: CRUDSystem, mount: Callable[..., None]) -> None:
    # Given a plugin manager with a stats route
    manager = PluginManager()

    def stats(ctx: RouteContext) -> dict:
        return {"resources": ctx.crud.count(), "resource": ctx.crud.resource_name}

    manager.add_route(PluginRouteConfig(name="stats", path="/stats", method=HTTPMethod.GET, handler=stats))
    # When it is asked over HTTP
    mount(memory_system.create_router("", plugin_manager_=manager))
    # Then the handler's answer comes back
    assert APIClient().get("/workflow/stats").json() == {"resources": 0, "resource": "workflow"}


def test_plugin_on_the_same_path_overrides_the_default_route(
    memory_system: CRUDSystem, mount: Callable[..., None]
) -> None:
    # Given a non-default plugin on /count
    manager = PluginManager()
    manager.register_plugin(RoutePlugin("my_count", HTTPMethod.GET, "/count", lambda ctx: {"count": -1}, priority=200))
    # When the count is asked
    mount(memory_system.create_router("", plugin_manager_=manager))
    # Then the plugin answers, not the default route
    assert APIClient().get("/workflow/count").json() == {"count": -1}


def test_plugin_manager_orders_routes_by_priority(memory_system: CRUDSystem) -> None:
    # Given a route with priority 1 beside the defaults
    manager = PluginManager()
    manager.add_route(
        PluginRouteConfig(name="first", path="/first", method=HTTPMethod.GET, handler=lambda ctx: {}, priority=1)
    )
    # When the manager resolves the routes of a CRUD
    routes = manager.get_route_configs(memory_system.get_crud(Workflow))
    priorities = [route.config.priority for route in routes]
    # Then they come by priority, the new one first, the defaults all there
    assert routes[0].config.name == "first"
    assert priorities == sorted(priorities)
    assert {"create", "get", "update", "delete", "count", "list"} <= {route.config.name for route in routes}


def test_default_plugins_are_flagged_as_defaults() -> None:
    # Given a new plugin manager
    manager = PluginManager()
    # When its plugins are listed
    # Then every default is flagged as one
    assert all(is_default for _, is_default in manager.plugins)


def test_errors_are_crudgen_json_even_without_the_project_exception_handler(
    memory_system: CRUDSystem, mount: Callable[..., None], settings
) -> None:
    # Given DRF's own exception handler instead of the project's
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "EXCEPTION_HANDLER": "rest_framework.views.exception_handler"}
    mount(memory_system.create_router(""))
    # When a missing workflow is read
    response = APIClient().get("/workflow/missing/data")
    # Then the error is still crudgen's JSON body
    assert response.json() == {"error": "not_found", "detail": "workflow missing not found"}


def test_unauthenticated_callers_get_401_in_crudgen_error_shape(memory_system: CRUDSystem) -> None:
    # Given routes behind DRF's authentication and no credentials
    patterns = memory_system.create_router("")
    # When the list is asked
    response = patterns[0].callback(APIRequestFactory().get("/workflow"))
    response.render()
    # Then the answer is 401 not_authenticated
    assert response.status_code == 401
    assert response.data["error"] == "not_authenticated"

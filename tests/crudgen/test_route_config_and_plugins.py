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
    mount(memory_system.create_router("", RouteConfig(delete=False)))
    rid = APIClient().post("/workflow", {"name": "w", "steps": []}, format="json").json()["resource_id"]
    response = APIClient().delete(f"/workflow/{rid}")
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"


def test_disabled_route_answers_404_where_nothing_else_serves_the_path(
    memory_system: CRUDSystem, mount: Callable[..., None]
) -> None:
    mount(memory_system.create_router("", RouteConfig(count=False)))
    assert APIClient().get("/workflow/count").status_code == 404


def test_route_options_disable_like_a_false(memory_system: CRUDSystem, mount: Callable[..., None]) -> None:
    mount(memory_system.create_router("", RouteConfig(create=RouteOptions(enabled=False))))
    assert APIClient().post("/workflow", {"name": "w", "steps": []}, format="json").status_code == 405


def test_background_task_runs_after_the_response_when_the_condition_holds(
    memory_system: CRUDSystem, mount: Callable[..., None]
) -> None:
    seen: list[str] = []
    config = RouteConfig.with_background_tasks(lambda body: seen.append(body["resource_id"]))
    mount(memory_system.create_router("", config))
    response = APIClient().post("/workflow", {"name": "w", "steps": []}, format="json")
    assert seen == [response.json()["resource_id"]]


def test_background_task_is_skipped_when_the_condition_fails(
    memory_system: CRUDSystem, mount: Callable[..., None]
) -> None:
    seen: list[dict] = []
    options = RouteOptions(
        background_task=BackgroundTaskMode.ENABLED,
        background_task_func=seen.append,
        background_task_condition=lambda body: False,
    )
    mount(memory_system.create_router("", RouteConfig(create=options)))
    response = APIClient().post("/workflow", {"name": "w", "steps": []}, format="json")
    assert response.status_code == 201
    assert seen == []


def test_background_task_is_not_run_before_the_response_is_closed(memory_system: CRUDSystem) -> None:
    seen: list[dict] = []
    patterns = memory_system.create_router("", RouteConfig.with_background_tasks(seen.append))
    request = APIRequestFactory().post("/workflow", {"name": "w", "steps": []}, format="json")
    force_authenticate(request, user=User(username="alice"))
    response = patterns[0].callback(request)
    response.render()
    assert response.status_code == 201
    assert seen == []
    response.close()
    assert len(seen) == 1


def test_custom_status_code_replaces_the_default(memory_system: CRUDSystem, mount: Callable[..., None]) -> None:
    mount(memory_system.create_router("", RouteConfig(create=RouteOptions(custom_status_code=202))))
    assert APIClient().post("/workflow", {"name": "w", "steps": []}, format="json").status_code == 202


class OnlyBob(BasePermission):
    def has_permission(self, request, view) -> bool:
        return request.user.get_username() == "bob"


def test_permission_class_dependency_refuses_with_403(memory_system: CRUDSystem, mount: Callable[..., None]) -> None:
    mount(memory_system.create_router("", RouteConfig(create=RouteOptions(custom_dependencies=[OnlyBob]))))
    refused = APIClient().post("/workflow", {"name": "w", "steps": []}, format="json")
    allowed = APIClient().post("/workflow", {"name": "w", "steps": []}, format="json", HTTP_X_USER_ID="bob")
    assert (refused.status_code, refused.json()["error"]) == (403, "permission_denied")
    assert allowed.status_code == 201


def test_callable_dependency_returning_false_refuses(memory_system: CRUDSystem, mount: Callable[..., None]) -> None:
    mount(memory_system.create_router("", RouteConfig(list=RouteOptions(custom_dependencies=[lambda request: False]))))
    assert APIClient().get("/workflow/data").status_code == 403


def test_route_config_to_dict_names_every_route() -> None:
    config = RouteConfig(delete=False, create=RouteOptions(custom_status_code=202))
    as_dict = config.to_dict()
    assert as_dict["delete"] is False
    assert as_dict["create"]["custom_status_code"] == 202
    assert set(as_dict) == {"create", "get", "update", "delete", "list", "count"}


def test_custom_plugin_route_is_served(memory_system: CRUDSystem, mount: Callable[..., None]) -> None:
    manager = PluginManager()

    def stats(ctx: RouteContext) -> dict:
        return {"resources": ctx.crud.count(), "resource": ctx.crud.resource_name}

    manager.add_route(PluginRouteConfig(name="stats", path="/stats", method=HTTPMethod.GET, handler=stats))
    mount(memory_system.create_router("", plugin_manager_=manager))
    assert APIClient().get("/workflow/stats").json() == {"resources": 0, "resource": "workflow"}


def test_plugin_on_the_same_path_overrides_the_default_route(
    memory_system: CRUDSystem, mount: Callable[..., None]
) -> None:
    manager = PluginManager()
    manager.register_plugin(RoutePlugin("my_count", HTTPMethod.GET, "/count", lambda ctx: {"count": -1}, priority=200))
    mount(memory_system.create_router("", plugin_manager_=manager))
    assert APIClient().get("/workflow/count").json() == {"count": -1}


def test_plugin_manager_orders_routes_by_priority(memory_system: CRUDSystem) -> None:
    manager = PluginManager()
    manager.add_route(
        PluginRouteConfig(name="first", path="/first", method=HTTPMethod.GET, handler=lambda ctx: {}, priority=1)
    )
    routes = manager.get_route_configs(memory_system.get_crud(Workflow))
    priorities = [route.config.priority for route in routes]
    assert routes[0].config.name == "first"
    assert priorities == sorted(priorities)
    assert {"create", "get", "update", "delete", "count", "list"} <= {route.config.name for route in routes}


def test_default_plugins_are_flagged_as_defaults() -> None:
    manager = PluginManager()
    assert all(is_default for _, is_default in manager.plugins)


def test_errors_are_crudgen_json_even_without_the_project_exception_handler(
    memory_system: CRUDSystem, mount: Callable[..., None], settings
) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "EXCEPTION_HANDLER": "rest_framework.views.exception_handler"}
    mount(memory_system.create_router(""))
    response = APIClient().get("/workflow/missing/data")
    assert response.json() == {"error": "not_found", "detail": "workflow missing not found"}


def test_unauthenticated_callers_get_401_in_crudgen_error_shape(memory_system: CRUDSystem) -> None:
    patterns = memory_system.create_router("")
    response = patterns[0].callback(APIRequestFactory().get("/workflow"))
    response.render()
    assert response.status_code == 401
    assert response.data["error"] == "not_authenticated"

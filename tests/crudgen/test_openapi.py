"""create_app and the OpenAPI schema of generated routes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from crudgen import CRUDSystem, RouteConfig
from tests.crudgen.conftest import Workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(mount: Callable[..., None]) -> dict:
    crud_system = CRUDSystem(use_plural=False)
    crud_system.register_model(Workflow)
    mount(crud_system.create_app(title="Flows", version="9.9.9", route_config=RouteConfig(count=False)))
    response = APIClient().get("/api/v1/openapi.json", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def test_schema_lists_every_generated_route(schema: dict) -> None:
    assert set(schema["paths"]) == {
        "/api/v1/workflow",
        "/api/v1/workflow/data",
        "/api/v1/workflow/meta",
        "/api/v1/workflow/full",
        "/api/v1/workflow/{resource_id}",
        "/api/v1/workflow/{resource_id}/data",
        "/api/v1/workflow/{resource_id}/meta",
        "/api/v1/workflow/{resource_id}/full",
        "/api/v1/workflow/{resource_id}/restore",
        "/api/v1/workflow/{resource_id}/revision-list",
        "/api/v1/workflow/{resource_id}/switch/{revision_id}",
    }
    assert set(schema["paths"]["/api/v1/workflow/{resource_id}"]) == {"get", "put", "patch", "delete"}


def test_schema_carries_the_model_schema_and_app_info(schema: dict) -> None:
    workflow = schema["components"]["schemas"]["Workflow"]
    create_body = schema["paths"]["/api/v1/workflow"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert workflow["required"] == ["name", "steps"]
    assert create_body == {"$ref": "#/components/schemas/Workflow"}
    assert (schema["info"]["title"], schema["info"]["version"]) == ("Flows", "9.9.9")


def test_schema_documents_list_query_parameters(schema: dict) -> None:
    parameters = {p["name"] for p in schema["paths"]["/api/v1/workflow/meta"]["get"]["parameters"]}
    assert {"page", "page_size", "created_by", "sort_by", "sort_order", "is_deleted"} <= parameters

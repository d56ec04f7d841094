"""Fixtures for crudgen: a movable clock, a storage per backend, URL mounting for HTTP tests, and the
test model with a second schema version of it."""

from __future__ import annotations

import io
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from django.db import connection
from rest_framework.test import APIClient

from crudgen import (
    CRUDSystem,
    DiskStorage,
    DjangoStorage,
    ListQueryParams,
    ListScope,
    MemoryStorage,
    MetadataConfig,
    RouteConfig,
)
from crudgen.storage.base import Storage


@dataclass
class Clock:
    current: datetime = field(default_factory=lambda: datetime(2026, 1, 5, 9, 0, tzinfo=UTC))

    def now(self) -> datetime:
        return self.current

    def advance(self, **delta: float) -> datetime:
        self.current += timedelta(**delta)
        return self.current


@dataclass
class Workflow:
    name: str
    steps: list[str]
    description: str = ""
    every_seconds: int | None = None
    enabled: bool = True


def plan_of_first_page(
    storage: DjangoStorage, params: ListQueryParams | None = None, scope: ListScope | None = None
) -> str:
    """The database's plan for the first list page of `storage` under `params` and `scope`.

    PostgreSQL is told to avoid sorts and sequential scans wherever an index allows: on the few
    rows of a test table its planner may prefer either, depending on whether autovacuum has
    analysed the table yet. A page with no suitable index still shows its Sort node.
    """
    params = params or ListQueryParams()
    page = storage._filtered(params, is_deleted=False, scope=scope).order_by(*storage._ordering(params))[:20]
    sql, sql_params = page.query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_sort = off")
            cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {'QUERY PLAN ' if connection.vendor == 'sqlite' else ''}{sql}", sql_params)
        return " ".join(str(row) for row in cursor.fetchall())


@dataclass
class WorkflowV2:
    name: str
    commands: list[str]
    description: str = ""
    every_seconds: int | None = None
    enabled: bool = True


class StepsRenamed:
    """v2 renamed `steps` to `commands`."""

    schema_version = "2"

    def migrate(self, data_stream: io.BytesIO, old_schema_version: str | None) -> dict[str, Any]:
        data = msgspec.json.decode(data_stream.read())
        data["commands"] = data.pop("steps")
        return data


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "disk", "django"])
def storage_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], Storage]:
    """Each backend in turn; the same contract tests run over all three."""
    if request.param == "memory":
        return lambda name: MemoryStorage(name)
    if request.param == "disk":
        return lambda name: DiskStorage(tmp_path / name)
    request.getfixturevalue("db")
    return DjangoStorage


@pytest.fixture
def system(storage_factory: Callable[[str], Storage], clock: Clock) -> CRUDSystem:
    crud_system = CRUDSystem(
        storage_factory=storage_factory,
        metadata_config=MetadataConfig.with_full_tracking(get_current_time=clock.now),
        use_plural=False,
    )
    crud_system.register_model(Workflow)
    return crud_system


@pytest.fixture
def mount(settings: pytest.FixtureRequest) -> Callable[..., None]:
    """Mount URL patterns as the root URLconf for this test only."""

    def apply(patterns: list) -> None:
        module = types.ModuleType("crudgen_test_urls")
        module.urlpatterns = patterns  # type: ignore[attr-defined]
        settings.ROOT_URLCONF = module

    return apply


@pytest.fixture
def api(system: CRUDSystem, mount: Callable[..., None]) -> APIClient:
    mount(system.create_router("/api", RouteConfig()))
    return APIClient()


@pytest.fixture
def created(api: APIClient) -> dict:
    response = api.post("/api/workflow", {"name": "build", "steps": ["make"]}, format="json")
    assert response.status_code == 201
    return response.json()

"""API clients generated from the schema the live server serves, once per session for each schema.

`workspace_client` is the generated Python package, importable; `client_as` makes a generated
client that signs in with a personal token made through the generated tokens operation. The
TypeScript check needs node and npm: CI sets WORKSPACE_REQUIRE_NODE=1 so their absence fails it
instead of skipping it.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.clients import generators
from tests.clients.generators import GeneratedPython, LiveSchema


@pytest.fixture(autouse=True)
def private_workspaces(workspace_dirs: Path) -> Path:
    """Every test here works in its own var dir and config (`tests.fixtures.items`)."""
    return workspace_dirs


@pytest.fixture
def live_schema(live_server, tmp_path: Path) -> LiveSchema:
    """The OpenAPI document the live server serves at /api/schema, as JSON in a file."""
    request = urllib.request.Request(f"{live_server.url}/api/schema", headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
    path = tmp_path / "schema.json"
    path.write_bytes(body)
    return LiveSchema(path=path, digest=hashlib.sha256(body).hexdigest())


@pytest.fixture(scope="session")
def _python_clients(tmp_path_factory: pytest.TempPathFactory) -> Callable[[LiveSchema], GeneratedPython]:
    made: dict[str, GeneratedPython] = {}

    def for_schema(schema: LiveSchema) -> GeneratedPython:
        if schema.digest not in made:
            project = tmp_path_factory.mktemp("python-client") / "workspace-client"
            made[schema.digest] = GeneratedPython(project, generators.generate_python_client(schema.path, project))
        return made[schema.digest]

    return for_schema


@pytest.fixture
def generated_python(
    live_schema: LiveSchema, _python_clients: Callable[[LiveSchema], GeneratedPython]
) -> GeneratedPython:
    """The Python client generated from the live schema (setup.py and `workspace_client/`)."""
    return _python_clients(live_schema)


@pytest.fixture
def workspace_client(generated_python: GeneratedPython) -> Iterator[ModuleType]:
    """The generated package, imported from its project folder (and forgotten after the test)."""
    sys.path.insert(0, str(generated_python.project))
    importlib.invalidate_caches()
    try:
        yield importlib.import_module(generators.PYTHON_PACKAGE)
    finally:
        sys.path.remove(str(generated_python.project))
        for name in [name for name in sys.modules if name.partition(".")[0] == generators.PYTHON_PACKAGE]:
            del sys.modules[name]


# Seconds a request of the flows may take: the first exec starts a sandbox.
CLIENT_TIMEOUT = 30.0


@pytest.fixture
def client_as(workspace_client: ModuleType, live_server) -> Iterator[Callable[..., Any]]:
    """`client_as("bob")`: a generated `AuthenticatedClient` with a personal token of bob's, made by
    the generated tokens operation (the mock identity's `X-User-Id` names bob for that one call) and
    sent as `Authorization: Token <token>` (`prefix="Bearer"` for the other scheme). Undocumented
    statuses raise (`raise_on_unexpected_status`)."""
    import httpx
    from workspace_client import AuthenticatedClient, Client
    from workspace_client.api.me import me_tokens_create
    from workspace_client.models import ApiTokenCreateInput

    opened: list[Any] = []

    def build(user_id: str, *, prefix: str = "Token") -> Any:
        timeout = httpx.Timeout(CLIENT_TIMEOUT)
        with Client(base_url=live_server.url, headers={"X-User-Id": user_id}, timeout=timeout) as setup:
            issued = me_tokens_create.sync_detailed(client=setup, body=ApiTokenCreateInput(name="flow script"))
        assert issued.status_code == 201, issued.content
        client = AuthenticatedClient(
            base_url=live_server.url,
            token=issued.parsed.token,
            prefix=prefix,
            timeout=timeout,
            raise_on_unexpected_status=True,
        )
        opened.append(client)
        return client

    yield build
    for client in opened:
        client.get_httpx_client().close()


@pytest.fixture(scope="session")
def typescript_node_modules() -> Path:
    """openapi-typescript and tsc, installed by `npm ci` from tests/clients/typescript's lockfile."""
    missing = generators.node_missing()
    if missing:
        if os.environ.get("WORKSPACE_REQUIRE_NODE") == "1":
            pytest.fail(f"{missing}, and WORKSPACE_REQUIRE_NODE=1 forbids skipping the TypeScript check.")
        pytest.skip(f"{missing}; the TypeScript client check is skipped.")
    return generators.typescript_tools()

"""Workflow fixtures: private workspaces and items, and workflow definitions on the generated resource."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.workspace.conftest import make_item, workspace_dirs  # noqa: F401 - shared fixtures
from workspace.generated import workflows


@pytest.fixture
def make_workflow(db: None) -> Callable[..., str]:
    """Stores a workflow definition as alice would through /api/v1/workflow; returns its id."""

    def build(steps: list[str], *, name: str = "checks", user: str = "alice", **fields: object) -> str:
        return workflows.create({"name": name, "steps": steps, **fields}, user=user)["resource_id"]

    return build

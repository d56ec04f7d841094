"""The project package (worker, periodic jobs): every test in its own var dir."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_workspaces(workspace_dirs: Path) -> Path:
    """Every test here works in its own var dir and config (`tests.fixtures.items`)."""
    return workspace_dirs

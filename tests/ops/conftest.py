"""Operations fixtures: the workspace's private dirs and configs, and a handle on the request log."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest


@pytest.fixture
def request_log(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> pytest.LogCaptureFixture:
    """caplog, seeing `workspace.requests` (which, in production, does not propagate to the root logger)."""
    monkeypatch.setattr(logging.getLogger("workspace.requests"), "propagate", True)
    caplog.set_level(logging.INFO, logger="workspace.requests")
    return caplog


@pytest.fixture(autouse=True)
def private_workspaces(workspace_dirs: Path) -> Path:
    """Every test here works in its own var dir and config (`tests.fixtures.items`)."""
    return workspace_dirs


@pytest.fixture(autouse=True)
def memos_forgotten(fresh_memos: None) -> None:
    """Limits are read afresh in every test (`tests.fixtures.quotas`)."""

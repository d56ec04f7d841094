"""Operations fixtures: the workspace's private dirs and configs, and a handle on the request log."""

from __future__ import annotations

import logging

import pytest

from tests.quotas.conftest import fresh_memos, per_user  # noqa: F401 - fixtures
from tests.workspace.conftest import make_item, workspace_dirs, write_config  # noqa: F401 - fixtures


@pytest.fixture
def request_log(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> pytest.LogCaptureFixture:
    """caplog, seeing `workspace.requests` (which, in production, does not propagate to the root logger)."""
    monkeypatch.setattr(logging.getLogger("workspace.requests"), "propagate", True)
    caplog.set_level(logging.INFO, logger="workspace.requests")
    return caplog

"""Workspace fixtures: a private var dir, a fake cgroup root, configs written per test, items."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from workspace.config import DEFAULT_APPS_DIR, forget_loaded_config
from workspace.filestore import workspace_dir
from workspace.models import Item


@pytest.fixture(autouse=True)
def workspace_dirs(settings, tmp_path: Path) -> Iterator[Path]:
    """Workspaces and sandbox state under a temp dir; cgroup files land in a fake v2 root."""
    var_dir = tmp_path / "var"
    cgroup_root = tmp_path / "cgroup"
    cgroup_root.mkdir()
    settings.WORKSPACE_VAR_DIR = var_dir
    settings.WORKSPACE_CGROUP_ROOT = str(cgroup_root)
    settings.WORKSPACE_CGROUP_DRIVER = "v2"
    # The demo makes alice staff; here nobody is unless a test says so.
    settings.WORKSPACE_MOCK_STAFF = []
    yield var_dir
    forget_loaded_config()


@pytest.fixture
def write_config(settings, tmp_path: Path) -> Callable[..., Path]:
    """Writes a deployment config (and optionally app descriptors) and points the settings at it."""

    def write(text: str, apps: dict[str, str] | None = None) -> Path:
        config = tmp_path / "workspace.toml"
        config.write_text(text)
        settings.WORKSPACE_CONFIG = str(config)
        if apps is not None:
            apps_dir = tmp_path / "apps"
            apps_dir.mkdir(exist_ok=True)
            for name, body in apps.items():
                (apps_dir / name).write_text(body)
            settings.WORKSPACE_APPS_DIR = str(apps_dir)
        else:
            settings.WORKSPACE_APPS_DIR = str(DEFAULT_APPS_DIR)
        forget_loaded_config()
        return config

    return write


@pytest.fixture
def make_item(db) -> Callable[..., Item]:
    def make(*, app_slug: str = "notebook", title: str = "Scratch", created_by: str = "alice", owner: str = "") -> Item:
        item = Item(app_slug=app_slug, title=title, owner=owner or created_by)
        item.stamp_created(created_by)
        item.save()
        workspace_dir(item.pk).mkdir(parents=True, exist_ok=True)
        return item

    return make


def item_url(item: Item, suffix: str = "") -> str:
    return f"/a/{item.app_slug}/items/{item.pk}{suffix}"

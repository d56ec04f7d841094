"""Which backend object serves a backend name, built from the config and settings in force."""

from __future__ import annotations

import threading
from pathlib import Path

from django.conf import settings

from workspace.config import get_config
from workspace.sandboxes.base import SandboxBackend
from workspace.sandboxes.http import HttpBackend
from workspace.sandboxes.isolation import configured_driver
from workspace.sandboxes.local import LocalBackend

_lock = threading.Lock()
_built: dict[tuple, SandboxBackend] = {}


def var_dir() -> Path:
    return Path(getattr(settings, "WORKSPACE_VAR_DIR", "var"))


def _key(name: str) -> tuple:
    return (
        name,
        get_config().sandbox.host_url,
        str(var_dir()),
        str(getattr(settings, "WORKSPACE_CGROUP_ROOT", "/sys/fs/cgroup")),
        getattr(settings, "WORKSPACE_CGROUP_DRIVER", "auto"),
    )


def backend_named(name: str) -> SandboxBackend:
    """The backend a ledger row names; rows keep their backend even if the config changes."""
    key = _key(name)
    with _lock:
        if key not in _built:
            _built[key] = _build(name)
        return _built[key]


def default_backend() -> SandboxBackend:
    return backend_named(get_config().sandbox.backend)


def _build(name: str) -> SandboxBackend:
    if name == "http":
        return HttpBackend(get_config().sandbox.host_url)
    if name == "local":
        root = var_dir()
        return LocalBackend(
            state_dir=root / "sandboxes", workspace_root=root / "workspaces", driver=configured_driver()
        )
    raise ValueError(f"Unknown sandbox backend {name!r}.")

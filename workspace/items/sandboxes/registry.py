"""Which backend object serves a backend name, built from the config and settings in force."""

from __future__ import annotations

import threading
from pathlib import Path

from django.conf import settings

from workspace.items.config import get_config
from workspace.items.sandboxes.base import SandboxBackend
from workspace.items.sandboxes.boundary import configured_boundary, etc_snapshots_dir
from workspace.items.sandboxes.etc_snapshot import prune_snapshots
from workspace.items.sandboxes.http import HttpBackend
from workspace.items.sandboxes.isolation import configured_cap, configured_driver
from workspace.items.sandboxes.local import LocalBackend
from workspace.items.volumes import unmount_under

_lock = threading.Lock()
_built: dict[tuple, SandboxBackend] = {}


def var_dir() -> Path:
    return Path(settings.WORKSPACE_VAR_DIR)


def _key(name: str) -> tuple:
    return (
        name,
        get_config().sandbox.host_url,
        str(var_dir()),
        str(settings.WORKSPACE_CGROUP_ROOT),
        settings.WORKSPACE_CGROUP_DRIVER,
        settings.WORKSPACE_SANDBOX_ISOLATION,
        settings.WORKSPACE_SANDBOX_EXEC_AGENT,
        settings.WORKSPACE_SANDBOX_WARM,
        settings.WORKSPACE_SANDBOX_HOST_TOKEN,
        configured_cap(),
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
        return HttpBackend(get_config().sandbox.host_url, token=settings.WORKSPACE_SANDBOX_HOST_TOKEN)
    if name == "local":
        root = var_dir()
        return LocalBackend(
            state_dir=root / "sandboxes",
            workspace_root=root / "workspaces",
            driver=configured_driver(),
            boundary=configured_boundary(),
            cap=configured_cap(),
            warm=settings.WORKSPACE_SANDBOX_WARM,
        )
    raise ValueError(f"Unknown sandbox backend {name!r}.")


def local_sandboxes_release() -> tuple[int, int]:
    """Closes every local sandbox under the var directory and unmounts its workspace images.

    Returns (sandboxes closed, images unmounted). For tests, benchmarks and a host being retired:
    the service itself never needs it.
    """
    closed = 0
    if (var_dir() / "sandboxes").is_dir():
        backend = backend_named("local")
        backend.warm.drain()
        backend.warm.sweep()
        for sandbox_id in backend.sandboxes():
            backend.close(sandbox_id)
            closed += 1
    # No sandbox of this var directory runs now: older /etc snapshots are bound by none.
    prune_snapshots(etc_snapshots_dir())
    return closed, unmount_under(var_dir())

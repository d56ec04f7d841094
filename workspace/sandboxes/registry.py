"""Which backend object serves a backend name, built from the settings in force (and, for the
http backend, the sandbox host's address, which the caller reads from its config)."""

from __future__ import annotations

import threading
from pathlib import Path

from django.conf import settings

from workspace.sandboxes.base import SandboxBackend
from workspace.sandboxes.boundary import configured_boundary, etc_snapshots_dir
from workspace.sandboxes.etc_snapshot import prune_snapshots
from workspace.sandboxes.http import HttpBackend
from workspace.sandboxes.isolation import configured_cap, configured_driver
from workspace.sandboxes.local import LocalBackend
from workspace.sandboxes.volumes import unmount_under

_lock = threading.Lock()
_built: dict[tuple, SandboxBackend] = {}


def var_dir() -> Path:
    return Path(settings.WORKSPACE_VAR_DIR)


def _key(name: str, host_url: str) -> tuple:
    return (
        name,
        # Only the http backend has a host: every caller of a local backend shares one object.
        host_url if name == "http" else "",
        str(var_dir()),
        str(settings.WORKSPACE_CGROUP_ROOT),
        settings.WORKSPACE_CGROUP_DRIVER,
        settings.WORKSPACE_SANDBOX_ISOLATION,
        settings.WORKSPACE_SANDBOX_EXEC_AGENT,
        settings.WORKSPACE_SANDBOX_WARM,
        host_token(host_url) if name == "http" else "",
        configured_cap(),
    )


def host_token(host_url: str) -> str:
    """The secret the app sends the sandbox host at `host_url`: its own, else the pool's shared one."""
    return settings.WORKSPACE_SANDBOX_HOST_TOKENS.get(host_url, settings.WORKSPACE_SANDBOX_HOST_TOKEN)


def backend_named(name: str, *, host_url: str = "") -> SandboxBackend:
    """The backend called `name` ("local", or "http" at `host_url`), built once for the settings in force."""
    key = _key(name, host_url)
    with _lock:
        if key not in _built:
            _built[key] = _build(name, host_url)
        return _built[key]


def _build(name: str, host_url: str) -> SandboxBackend:
    if name == "http":
        return HttpBackend(host_url, token=host_token(host_url))
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


def host_sandboxes_release(state_dir: Path) -> int:
    """Closes every sandbox a sandbox host that no longer runs left in its state directory (a host's
    sandboxes outlive its process, so that a restarted host finds them). Returns how many."""
    backend = LocalBackend(
        state_dir=state_dir,
        workspace_root=var_dir() / "workspaces",
        driver=configured_driver(),
        boundary=configured_boundary(),
        cap=configured_cap(),
    )
    closed = 0
    for sandbox_id in backend.sandboxes():
        backend.close(sandbox_id)
        closed += 1
    return closed


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

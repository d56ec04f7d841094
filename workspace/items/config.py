"""The deployment config and app descriptors (docs/ARCHITECTURE.md §4), parsed once into frozen dataclasses."""

from __future__ import annotations

import re
import threading
import tomllib
import urllib.parse
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from quotas.sizes import SizeError, parse_duration_seconds, parse_optional_size
from quotas.values import SandboxSize, UserLimits

# The shipped deployment config and descriptors sit in the project package, beside the settings.
_PROJECT_DIR = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = _PROJECT_DIR / "default.toml"
DEFAULT_APPS_DIR = _PROJECT_DIR / "apps"
BACKENDS = ("local", "http")
_HOST_URL = re.compile(r"^https?://[A-Za-z0-9.\-\[\]:]{1,200}(/[A-Za-z0-9._~\-/]{0,200})?$")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")

_SANDBOX_KEYS = {
    "backend", "host_url", "hosts", "cpu", "memory", "pids", "workspace_quota",
    "idle_reclaim", "lease", "exec_timeout", "exec_timeout_max",
}  # fmt: skip
_RESOURCE_KEYS = {"cpu", "memory", "disk"}
# Who answers an app's chats (README "Choosing an agent"): the built-in agent, or the model agent
# where a provider is connected.
AGENTS = ("deterministic", "model")
_PER_USER_KEYS = {"count", "cpu", "memory", "disk"}


class ConfigError(ImproperlyConfigured):
    """A bad config or descriptor; the message names the file and the key."""

    def __init__(self, source: Path, key: str, problem: str) -> None:
        super().__init__(f"{source}: {key}: {problem}")
        self.source = source
        self.key = key


@dataclass(frozen=True)
class SandboxSettings:
    """The `[sandbox]` table: the pre-existing isolation settings every resolution falls back to."""

    backend: str = "local"
    # The http backend's sandbox hosts (`hosts`, or `host_url` for one): a pool that new sandboxes
    # are placed on by free capacity (DESIGN.md §5 "Many sandbox machines").
    hosts: tuple[str, ...] = ()
    cpu: float | None = None
    memory: int | None = None
    pids: int | None = 512
    workspace_quota: int = 1024**3
    idle_reclaim: timedelta = timedelta(minutes=30)
    lease: timedelta = timedelta(seconds=90)
    exec_timeout: float = 30.0
    exec_timeout_max: float = 600.0


@dataclass(frozen=True)
class ResourceValues:
    """Declared values; None means "not declared here" (fall through to the next source)."""

    cpu: float | None = None
    memory: int | None = None
    disk: int | None = None


@dataclass(frozen=True)
class ResolvedResources:
    """An app's resources after resolution: its sandbox size, and its disk limit (0 = unlimited)."""

    sandbox: SandboxSize
    disk_bytes: int


@dataclass(frozen=True)
class AppDescriptor:
    slug: str
    name: str
    source: Path
    declared: ResourceValues
    resources: ResolvedResources
    agent: str = "deterministic"
    # `needs_model = true`: the app exists only where a model is connected (WORKSPACE_LLM_BASE_URL).
    needs_model: bool = False


@dataclass(frozen=True)
class WorkspaceConfig:
    source: Path
    sandbox: SandboxSettings
    per_app_default: ResourceValues
    per_app_max: ResourceValues
    # `[resources.per_user]`: enforced by the quota layer, parsed here so a bad value fails start-up.
    per_user: UserLimits
    apps: dict[str, AppDescriptor] = field(default_factory=dict)

    def app(self, slug: str) -> AppDescriptor | None:
        return self.apps.get(slug)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(path, "(file)", f"cannot be read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, "(syntax)", f"is not valid TOML: {exc}") from exc


def _table(raw: dict[str, Any], key: str, source: Path, allowed: set[str] | None) -> dict[str, Any]:
    value: Any = raw
    for part in key.split("."):
        value = value.get(part, {}) if isinstance(value, dict) else None
    if not isinstance(value, dict):
        raise ConfigError(source, key, "must be a table")
    if allowed is not None and (unknown := sorted(set(value) - allowed)):
        raise ConfigError(source, f"{key}.{unknown[0]}", f"is not a known key (expected one of {sorted(allowed)})")
    return value


def _cpu(value: Any, source: Path, key: str) -> float | None:
    """Cores; 0 means unspecified (spec "Limits" 4: cpu 0 keeps falling through)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(source, key, f"expected a non-negative number of cores, got {value!r}")
    return float(value) or None


def _size(value: Any, source: Path, key: str, *, allow_max: bool = True) -> int | None:
    try:
        return parse_optional_size(value, allow_max=allow_max)
    except SizeError as exc:
        raise ConfigError(source, key, str(exc)) from exc


def _seconds(value: Any, source: Path, key: str) -> float:
    try:
        return parse_duration_seconds(value)
    except SizeError as exc:
        raise ConfigError(source, key, str(exc)) from exc


def _count(value: Any, source: Path, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(source, key, f"expected a non-negative integer, got {value!r}")
    return value


def _resource_values(table: dict[str, Any], source: Path, prefix: str) -> ResourceValues:
    return ResourceValues(
        cpu=_cpu(table["cpu"], source, f"{prefix}.cpu") if "cpu" in table else None,
        memory=_size(table["memory"], source, f"{prefix}.memory") if "memory" in table else None,
        disk=_size(table["disk"], source, f"{prefix}.disk") if "disk" in table else None,
    )


def _sandbox_settings(raw: dict[str, Any], source: Path) -> SandboxSettings:
    table = _table(raw, "sandbox", source, _SANDBOX_KEYS)
    base = SandboxSettings()
    backend = table.get("backend", base.backend)
    if backend not in BACKENDS:
        raise ConfigError(source, "sandbox.backend", f"expected one of {list(BACKENDS)}, got {backend!r}")
    hosts = _hosts(table, backend, source)
    quota = _size(table.get("workspace_quota", "1G"), source, "sandbox.workspace_quota")
    if quota is None:
        raise ConfigError(source, "sandbox.workspace_quota", "must be a size; disk always resolves to a number")
    exec_timeout = _seconds(table.get("exec_timeout", base.exec_timeout), source, "sandbox.exec_timeout")
    exec_max = _seconds(table.get("exec_timeout_max", base.exec_timeout_max), source, "sandbox.exec_timeout_max")
    if exec_timeout > exec_max:
        raise ConfigError(source, "sandbox.exec_timeout", f"{exec_timeout}s is above exec_timeout_max {exec_max}s")
    pids = _count(table.get("pids", base.pids), source, "sandbox.pids")
    return SandboxSettings(
        backend=backend,
        hosts=hosts,
        cpu=_cpu(table.get("cpu", 0), source, "sandbox.cpu"),
        memory=_size(table.get("memory", ""), source, "sandbox.memory"),
        pids=pids,
        workspace_quota=quota,
        idle_reclaim=timedelta(seconds=_seconds(table.get("idle_reclaim", "30m"), source, "sandbox.idle_reclaim")),
        lease=timedelta(seconds=_seconds(table.get("lease", "90s"), source, "sandbox.lease")),
        exec_timeout=exec_timeout,
        exec_timeout_max=exec_max,
    )


# The most hosts one pool holds: placement reads them all, under one lock.
MAX_HOSTS = 256


def _hosts(table: dict[str, Any], backend: str, source: Path) -> tuple[str, ...]:
    """`hosts = ["http://sandbox-1:8100", ...]`, or `host_url = "..."` for a pool of one; each an
    http(s) URL with a host and nothing after its path, named once."""
    if "hosts" in table and "host_url" in table:
        raise ConfigError(source, "sandbox.hosts", "give `hosts` or `host_url` (one host), not both")
    key = "sandbox.hosts" if "hosts" in table else "sandbox.host_url"
    # `host_url = ""` is the shipped configs' "no host" (the local backend).
    raw = table["hosts"] if "hosts" in table else ([table["host_url"]] if table.get("host_url", "") != "" else [])
    if not isinstance(raw, list) or len(raw) > MAX_HOSTS:
        raise ConfigError(source, key, f"expected a list of at most {MAX_HOSTS} URLs, got {raw!r}")
    hosts: list[str] = []
    for url in raw:
        if not isinstance(url, str) or not _HOST_URL.match(url) or not _address_parses(url):
            raise ConfigError(
                source, key, f"the http backend needs http(s) URLs like http://sandbox-1:8100, got {url!r}"
            )
        if url.rstrip("/") in hosts:
            raise ConfigError(source, key, f"{url!r} is named twice")
        hosts.append(url.rstrip("/"))
    if backend == "http" and not hosts:
        raise ConfigError(source, key, "the http backend needs `hosts` (or `host_url`): the sandbox hosts' URLs")
    return tuple(hosts)


def _address_parses(url: str) -> bool:
    """Whether the URL has a host and, if any, a port that is a number (the pattern lets `a:b:c` by)."""
    try:
        parts = urllib.parse.urlsplit(url)
        return bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:
        return False


def _per_user(raw: dict[str, Any], source: Path) -> UserLimits:
    table = _table(raw, "resources.per_user", source, _PER_USER_KEYS)
    return UserLimits.from_site(
        count=_count(table["count"], source, "resources.per_user.count") if "count" in table else None,
        cpu=_cpu(table["cpu"], source, "resources.per_user.cpu") if "cpu" in table else None,
        memory=_size(table["memory"], source, "resources.per_user.memory") if "memory" in table else None,
        disk=_size(table["disk"], source, "resources.per_user.disk") if "disk" in table else None,
    )


def _first(*values: Any) -> Any:
    return next((value for value in values if value is not None), None)


def _check_ceiling(value: float | None, ceiling: float | None, where: str, source: Path, key: str) -> None:
    """A ceiling binds a concrete value; 0 (unlimited) is above every ceiling. No silent truncation."""
    if ceiling is None or ceiling == 0 or value is None:
        return
    if value == 0 or value > ceiling:
        shown = "unlimited (0)" if value == 0 else value
        raise ConfigError(
            source, key, f"{where} resolves to {shown}, above the ceiling resources.per_app.max ({ceiling})"
        )


def resolve_resources(
    declared: ResourceValues, *, default: ResourceValues, sandbox: SandboxSettings
) -> ResolvedResources:
    """Per dimension, first declared wins: app, then per_app.default, then the legacy settings."""
    return ResolvedResources(
        sandbox=SandboxSize(
            cpu_cores=_first(declared.cpu, default.cpu, sandbox.cpu),
            memory_bytes=_first(declared.memory, default.memory, sandbox.memory),
            pids_max=sandbox.pids,
        ),
        disk_bytes=_first(declared.disk, default.disk, sandbox.workspace_quota),
    )


def load_app(
    path: Path, *, default: ResourceValues, maximum: ResourceValues, sandbox: SandboxSettings
) -> AppDescriptor:
    raw = _read_toml(path)
    if unknown := sorted(set(raw) - {"slug", "name", "resources", "agent", "needs_model"}):
        raise ConfigError(path, unknown[0], "is not a known key (expected slug, name, resources, agent, needs_model)")
    slug = raw.get("slug")
    if not isinstance(slug, str) or not _SLUG.match(slug):
        raise ConfigError(path, "slug", f"expected lowercase letters, digits and dashes, got {slug!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(path, "name", "must be a non-empty string")
    agent = raw.get("agent", AGENTS[0])
    if agent not in AGENTS:
        raise ConfigError(path, "agent", f'expected "deterministic" or "model", got {agent!r}')
    needs_model = raw.get("needs_model", False)
    if not isinstance(needs_model, bool):
        raise ConfigError(path, "needs_model", f"expected true or false, got {needs_model!r}")
    declared = _resource_values(_table(raw, "resources", path, _RESOURCE_KEYS), path, "resources")
    resolved = resolve_resources(declared, default=default, sandbox=sandbox)
    where = f"app {slug!r}"
    _check_ceiling(resolved.sandbox.cpu_cores, maximum.cpu, where, path, "resources.cpu")
    _check_ceiling(resolved.sandbox.memory_bytes, maximum.memory, where, path, "resources.memory")
    _check_ceiling(resolved.disk_bytes, maximum.disk, where, path, "resources.disk")
    return AppDescriptor(
        slug=slug,
        name=name.strip(),
        source=path,
        declared=declared,
        resources=resolved,
        agent=agent,
        needs_model=needs_model,
    )


def load_config(config_path: Path, apps_dir: Path, *, model_connected: bool = False) -> WorkspaceConfig:
    """Reads and checks everything; raises ConfigError (an ImproperlyConfigured) on the first problem.
    An app with `needs_model` is checked like any other, then left out unless `model_connected`."""
    raw = _read_toml(config_path)
    if unknown := sorted(set(raw) - {"sandbox", "resources"}):
        raise ConfigError(config_path, unknown[0], "is not a known table (expected sandbox, resources)")
    _table(raw, "resources", config_path, {"per_app", "per_user"})
    _table(raw, "resources.per_app", config_path, {"default", "max"})
    sandbox = _sandbox_settings(raw, config_path)
    default_table = _table(raw, "resources.per_app.default", config_path, _RESOURCE_KEYS)
    default = _resource_values(default_table, config_path, "resources.per_app.default")
    max_table = _table(raw, "resources.per_app.max", config_path, _RESOURCE_KEYS)
    maximum = _resource_values(max_table, config_path, "resources.per_app.max")
    for dimension in ("cpu", "memory", "disk"):
        key = f"resources.per_app.default.{dimension}"
        _check_ceiling(getattr(default, dimension), getattr(maximum, dimension), "the default", config_path, key)
    if not apps_dir.is_dir():
        raise ConfigError(apps_dir, "(directory)", "the app descriptor directory does not exist")
    apps: dict[str, AppDescriptor] = {}
    for path in sorted(apps_dir.glob("*.toml")):
        app = load_app(path, default=default, maximum=maximum, sandbox=sandbox)
        if app.slug in apps:
            raise ConfigError(path, "slug", f"{app.slug!r} is already declared by {apps[app.slug].source}")
        apps[app.slug] = app
    if not model_connected:
        apps = {slug: app for slug, app in apps.items() if not app.needs_model}
    return WorkspaceConfig(
        source=config_path,
        sandbox=sandbox,
        per_app_default=default,
        per_app_max=maximum,
        per_user=_per_user(raw, config_path),
        apps=apps,
    )


_lock = threading.Lock()
_loaded: dict[tuple[str, str, bool], WorkspaceConfig] = {}


def configured_paths() -> tuple[Path, Path]:
    return (
        Path(settings.WORKSPACE_CONFIG or DEFAULT_CONFIG),
        Path(settings.WORKSPACE_APPS_DIR or DEFAULT_APPS_DIR),
    )


def get_config() -> WorkspaceConfig:
    """The config the settings name, parsed once per process (and again if the settings change)."""
    config_path, apps_dir = configured_paths()
    connected = bool(settings.WORKSPACE_LLM_BASE_URL)
    key = (str(config_path), str(apps_dir), connected)
    with _lock:
        if key not in _loaded:
            _loaded[key] = load_config(config_path, apps_dir, model_connected=connected)
        return _loaded[key]


def forget_loaded_config() -> None:
    """Tests that rewrite a config file in place call this to read it again."""
    with _lock:
        _loaded.clear()

"""Start-up: resolution per dimension, ceilings that fail loudly, and warnings for unenforceable limits."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from django.apps import apps as django_apps
from django.core.exceptions import ImproperlyConfigured

from quotas.startup import unenforceable_warnings
from quotas.values import SandboxSize, UserLimits
from tests.fixtures.quotas import GIB, MIB
from workspace.items.apps import quota_warnings
from workspace.items.config import load_config


def _load(tmp_path: Path, config: str, apps: dict[str, str]):
    (tmp_path / "c.toml").write_text(config)
    apps_dir = tmp_path / "apps"
    apps_dir.mkdir(exist_ok=True)
    for name, body in apps.items():
        (apps_dir / name).write_text(body)
    return load_config(tmp_path / "c.toml", apps_dir)


def _app(slug: str, resources: str = "") -> dict[str, str]:
    return {
        f"{slug}.toml": f'slug = "{slug}"\nname = "{slug}"\n' + (f"[resources]\n{resources}\n" if resources else "")
    }


def test_each_dimension_takes_the_first_declared_source(tmp_path):
    config = _load(
        tmp_path,
        '[sandbox]\ncpu = 4\nmemory = "2G"\nworkspace_quota = "5G"\n[resources.per_app.default]\ncpu = 2\n',
        {**_app("a", 'memory = "256M"'), **_app("b")},
    )
    a, b = config.apps["a"].resources, config.apps["b"].resources
    assert (a.sandbox.cpu_cores, a.sandbox.memory_bytes, a.disk_bytes) == (2.0, 256 * MIB, 5 * GIB)
    assert (b.sandbox.cpu_cores, b.sandbox.memory_bytes, b.disk_bytes) == (2.0, 2 * GIB, 5 * GIB)


def test_disk_zero_stops_fall_through_even_over_a_default(tmp_path):
    config = _load(tmp_path, '[resources.per_app.default]\ndisk = "2G"\n', _app("a", 'disk = "0"'))
    assert config.apps["a"].resources.disk_bytes == 0


def test_cpu_zero_falls_through_to_the_default(tmp_path):
    config = _load(tmp_path, "[resources.per_app.default]\ncpu = 3\n", _app("a", "cpu = 0"))
    assert config.apps["a"].resources.sandbox.cpu_cores == 3.0


def test_deployments_declaring_nothing_resolve_to_the_legacy_numbers(tmp_path):
    config = _load(tmp_path, '[sandbox]\nworkspace_quota = "3G"\n', _app("a"))
    resources = config.apps["a"].resources
    assert (resources.sandbox.cpu_cores, resources.sandbox.memory_bytes, resources.disk_bytes) == (None, None, 3 * GIB)


@pytest.mark.parametrize(
    ("config", "app", "key"),
    [
        ("[resources.per_app.max]\ncpu = 2\n", "cpu = 4", "resources.cpu"),
        ('[resources.per_app.max]\nmemory = "1G"\n', 'memory = "2G"', "resources.memory"),
        ('[resources.per_app.max]\ndisk = "1G"\n', 'disk = "0"', "resources.disk"),
        ('[sandbox]\nworkspace_quota = "5G"\n[resources.per_app.max]\ndisk = "1G"\n', "", "resources.disk"),
    ],
)
def test_an_app_over_its_ceiling_fails_naming_the_app_and_dimension(tmp_path, config, app, key):
    with pytest.raises(ImproperlyConfigured) as failure:
        _load(tmp_path, config, _app("heavy", app))
    assert "app 'heavy'" in str(failure.value)
    assert key in str(failure.value)


@pytest.mark.parametrize(
    ("config", "dimension"),
    [
        ("[resources.per_app.default]\ncpu = 4\n[resources.per_app.max]\ncpu = 2\n", "cpu"),
        ('[resources.per_app.default]\nmemory = "0"\n[resources.per_app.max]\nmemory = "1G"\n', "memory"),
        ('[resources.per_app.default]\ndisk = "2G"\n[resources.per_app.max]\ndisk = "1G"\n', "disk"),
    ],
)
def test_a_default_above_its_own_max_fails_start_up(tmp_path, config, dimension):
    with pytest.raises(ImproperlyConfigured) as failure:
        _load(tmp_path, config, {})
    assert f"resources.per_app.default.{dimension}" in str(failure.value)


@pytest.mark.parametrize(
    "per_user", ["count = -1", "count = 1.5", 'cpu = "two"', 'memory = "12X"', "disk = true", "swap = 1"]
)
def test_a_bad_per_user_value_fails_start_up_naming_the_key(tmp_path, per_user):
    with pytest.raises(ImproperlyConfigured) as failure:
        _load(tmp_path, f"[resources.per_user]\n{per_user}\n", {})
    assert "resources.per_user." in str(failure.value)


def test_per_user_values_parse_with_their_spec_meanings(tmp_path):
    config = _load(tmp_path, '[resources.per_user]\ncount = 0\ncpu = 0\nmemory = ""\ndisk = "10G"\n', {})
    per_user = config.per_user
    limits = UserLimits.from_site(count=per_user.count, cpu=per_user.cpu, memory=per_user.memory, disk=per_user.disk)
    assert limits == UserLimits(disk=10 * GIB)


def test_per_user_cpu_with_no_app_declaring_cpu_warns():
    warnings = unenforceable_warnings(
        site=UserLimits(cpu=2), apps={"a": SandboxSize(None, 512 * MIB), "b": SandboxSize()}
    )
    assert len(warnings) == 1
    assert "resources.per_user.cpu cannot be enforced" in warnings[0]


def test_apps_escaping_a_per_user_dimension_are_named():
    warnings = unenforceable_warnings(
        site=UserLimits(memory=GIB), apps={"notebook": SandboxSize(1.0, 512 * MIB), "rca": SandboxSize()}
    )
    assert warnings == [
        "resources.per_user.memory does not bind the apps rca: they declare no memory size (or an unlimited "
        "one), so their sandboxes add nothing to the per-user sum."
    ]


def test_an_unlimited_app_memory_escapes_the_per_user_memory():
    warnings = unenforceable_warnings(site=UserLimits(memory=GIB), apps={"big": SandboxSize(1.0, 0)})
    assert "cannot be enforced" in warnings[0]


def test_count_and_disk_never_warn():
    assert unenforceable_warnings(site=UserLimits(count=1, disk=GIB), apps={"rca": SandboxSize()}) == []


@pytest.mark.django_db
def test_start_up_logs_each_warning(write_config, caplog):
    write_config('[resources.per_user]\ncpu = 2\nmemory = "1G"\n')
    assert len(quota_warnings()) == 2  # rca escapes both cpu and memory
    with caplog.at_level(logging.WARNING, logger="workspace.quotas"):
        django_apps.get_app_config("items").ready()
    logged = [record.getMessage() for record in caplog.records if record.name == "workspace.quotas"]
    assert any("resources.per_user.cpu" in message and "rca" in message for message in logged)
    assert any("resources.per_user.memory" in message for message in logged)


@pytest.mark.django_db
def test_the_shipped_config_starts_without_quota_warnings(write_config):
    write_config(Path("workspace/default.toml").read_text())
    assert quota_warnings() == []

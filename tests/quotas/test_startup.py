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
    # Given legacy [sandbox] values, a per-app default cpu, app a declaring memory and app b declaring nothing
    # When the config is loaded
    config = _load(
        tmp_path,
        '[sandbox]\ncpu = 4\nmemory = "2G"\nworkspace_quota = "5G"\n[resources.per_app.default]\ncpu = 2\n',
        {**_app("a", 'memory = "256M"'), **_app("b")},
    )
    a, b = config.apps["a"].resources, config.apps["b"].resources
    # Then each dimension comes from the app, else the per-app default, else the legacy value
    assert (a.sandbox.cpu_cores, a.sandbox.memory_bytes, a.disk_bytes) == (2.0, 256 * MIB, 5 * GIB)
    assert (b.sandbox.cpu_cores, b.sandbox.memory_bytes, b.disk_bytes) == (2.0, 2 * GIB, 5 * GIB)


def test_disk_zero_stops_fall_through_even_over_a_default(tmp_path):
    # Given a per-app default disk of 2G, and an app that says disk 0
    # When the config is loaded
    config = _load(tmp_path, '[resources.per_app.default]\ndisk = "2G"\n', _app("a", 'disk = "0"'))
    # Then the app's disk is 0, unlimited, not the default
    assert config.apps["a"].resources.disk_bytes == 0


def test_cpu_zero_falls_through_to_the_default(tmp_path):
    # Given a per-app default cpu of 3, and an app that says cpu 0
    # When the config is loaded
    config = _load(tmp_path, "[resources.per_app.default]\ncpu = 3\n", _app("a", "cpu = 0"))
    # Then the app's cpu is the default's 3
    assert config.apps["a"].resources.sandbox.cpu_cores == 3.0


def test_deployments_declaring_nothing_resolve_to_the_legacy_numbers(tmp_path):
    # Given a deployment that declares only the legacy workspace_quota, and an app that declares nothing
    # When the config is loaded
    config = _load(tmp_path, '[sandbox]\nworkspace_quota = "3G"\n', _app("a"))
    # Then cpu and memory are unspecified and disk is the legacy value
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
    # Given an app whose cpu, memory or disk, declared or inherited, is above the per-app max
    # When the config is loaded / Then it fails
    with pytest.raises(ImproperlyConfigured) as failure:
        _load(tmp_path, config, _app("heavy", app))
    # Then the error names the app and the dimension
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
    # Given a per-app default above the per-app max of its dimension
    # When the config is loaded / Then it fails naming the default's key
    with pytest.raises(ImproperlyConfigured) as failure:
        _load(tmp_path, config, {})
    assert f"resources.per_app.default.{dimension}" in str(failure.value)


@pytest.mark.parametrize(
    "per_user", ["count = -1", "count = 1.5", 'cpu = "two"', 'memory = "12X"', "disk = true", "swap = 1"]
)
def test_a_bad_per_user_value_fails_start_up_naming_the_key(tmp_path, per_user):
    # Given a per-user value that is negative, fractional, ill-typed, ill-sized or unknown
    # When the config is loaded / Then it fails naming a per-user key
    with pytest.raises(ImproperlyConfigured) as failure:
        _load(tmp_path, f"[resources.per_user]\n{per_user}\n", {})
    assert "resources.per_user." in str(failure.value)


def test_per_user_values_parse_with_their_spec_meanings(tmp_path):
    # Given per-user values of count 0, cpu 0, an empty memory and a disk of 10G
    # When they are read as site limits
    config = _load(tmp_path, '[resources.per_user]\ncount = 0\ncpu = 0\nmemory = ""\ndisk = "10G"\n', {})
    per_user = config.per_user
    limits = UserLimits.from_site(count=per_user.count, cpu=per_user.cpu, memory=per_user.memory, disk=per_user.disk)
    # Then 0 and empty mean no limit, and only the disk limit stays
    assert limits == UserLimits(disk=10 * GIB)


def test_per_user_cpu_with_no_app_declaring_cpu_warns():
    # Given a per-user cpu limit, and apps that declare no cpu
    # When start-up looks for limits it cannot enforce
    warnings = unenforceable_warnings(
        site=UserLimits(cpu=2), apps={"a": SandboxSize(None, 512 * MIB), "b": SandboxSize()}
    )
    # Then it warns once that the per-user cpu cannot be enforced
    assert len(warnings) == 1
    assert "resources.per_user.cpu cannot be enforced" in warnings[0]


def test_apps_escaping_a_per_user_dimension_are_named():
    # Given a per-user memory limit, a notebook that declares memory and rca that declares none
    # When start-up looks for limits it cannot enforce
    warnings = unenforceable_warnings(
        site=UserLimits(memory=GIB), apps={"notebook": SandboxSize(1.0, 512 * MIB), "rca": SandboxSize()}
    )
    # Then it names rca as escaping the per-user memory, and why
    assert warnings == [
        "resources.per_user.memory does not bind the apps rca: they declare no memory size (or an unlimited "
        "one), so their sandboxes add nothing to the per-user sum."
    ]


def test_an_unlimited_app_memory_escapes_the_per_user_memory():
    # Given a per-user memory limit, and an app whose memory is unlimited
    # When start-up looks for limits it cannot enforce
    warnings = unenforceable_warnings(site=UserLimits(memory=GIB), apps={"big": SandboxSize(1.0, 0)})
    # Then it warns that the memory limit cannot be enforced
    assert "cannot be enforced" in warnings[0]


def test_count_and_disk_never_warn():
    # Given per-user count and disk limits, and an app that declares nothing
    # When start-up looks for limits it cannot enforce / Then it finds none: those limits bind every app
    assert unenforceable_warnings(site=UserLimits(count=1, disk=GIB), apps={"rca": SandboxSize()}) == []


@pytest.mark.django_db
def test_start_up_logs_each_warning(write_config, caplog):
    # Given per-user cpu and memory limits, which rca escapes both of
    write_config('[resources.per_user]\ncpu = 2\nmemory = "1G"\n')
    assert len(quota_warnings()) == 2  # rca escapes both cpu and memory
    # When the items app starts
    with caplog.at_level(logging.WARNING, logger="workspace.quotas"):
        django_apps.get_app_config("items").ready()
    # Then each warning is logged, rca named under cpu
    logged = [record.getMessage() for record in caplog.records if record.name == "workspace.quotas"]
    assert any("resources.per_user.cpu" in message and "rca" in message for message in logged)
    assert any("resources.per_user.memory" in message for message in logged)


@pytest.mark.django_db
def test_the_shipped_config_starts_without_quota_warnings(write_config):
    # Given the deployment config the repository ships
    write_config(Path("workspace/default.toml").read_text())
    # When start-up looks for limits it cannot enforce / Then it finds none
    assert quota_warnings() == []


@pytest.mark.django_db
def test_start_up_warns_that_an_app_without_a_size_runs_under_the_kernel_cap(write_config, caplog):
    # Given a deployment config that gives rca (which declares nothing) no size
    write_config("[sandbox]\n")
    # When the items app starts
    with caplog.at_level(logging.WARNING, logger="workspace.quotas"):
        django_apps.get_app_config("items").ready()
    # Then it names rca under the memory and cpu caps
    logged = [record.getMessage() for record in caplog.records if record.name == "workspace.quotas"]
    assert any("rca" in message and "WORKSPACE_SANDBOX_CAP_MEMORY" in message for message in logged)
    assert any("rca" in message and "WORKSPACE_SANDBOX_CAP_CPU" in message for message in logged)


@pytest.mark.django_db
def test_the_shipped_config_leaves_no_app_to_the_kernel_cap(write_config, caplog):
    # Given the deployment config the repository ships
    write_config(Path("workspace/default.toml").read_text())
    # When the items app starts
    with caplog.at_level(logging.WARNING, logger="workspace.quotas"):
        django_apps.get_app_config("items").ready()
    # Then no app is named as running under the cap
    assert not any("WORKSPACE_SANDBOX_CAP" in record.getMessage() for record in caplog.records)

"""Deployment config and app descriptors: resolution, size strings, and failing start-up loudly."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from quotas.sizes import SizeError, format_size, parse_duration_seconds, parse_size, size_string
from workspace.items.config import DEFAULT_APPS_DIR, DEFAULT_CONFIG, get_config, load_config

MIB = 1024**2
GIB = 1024**3


def _load(tmp_path: Path, config: str, apps: dict[str, str]):
    (tmp_path / "c.toml").write_text(config)
    apps_dir = tmp_path / "apps"
    apps_dir.mkdir(exist_ok=True)
    for name, body in apps.items():
        (apps_dir / name).write_text(body)
    return load_config(tmp_path / "c.toml", apps_dir)


def test_shipped_config_loads_notebook_and_rca():
    # Given the config and app descriptors the repository ships
    # When they are loaded
    config = load_config(DEFAULT_CONFIG, DEFAULT_APPS_DIR)
    # Then notebook and rca are declared, with a 90 s lease and a 30 min idle reclaim
    assert set(config.apps) >= {"notebook", "rca"}
    assert config.sandbox.lease == timedelta(seconds=90)
    assert config.sandbox.idle_reclaim == timedelta(minutes=30)


def test_notebook_declares_cpu_and_memory_and_rca_takes_the_shipped_default():
    # Given the config and app descriptors the repository ships
    # When they are loaded
    config = load_config(DEFAULT_CONFIG, DEFAULT_APPS_DIR)
    notebook, rca = config.apps["notebook"].resources, config.apps["rca"].resources
    # Then notebook asks 1 cpu and 512M, rca declares neither and gets the default's, and rca's
    # disk comes from workspace_quota
    assert (notebook.sandbox.cpu_cores, notebook.sandbox.memory_bytes) == (1.0, 512 * MIB)
    assert config.apps["rca"].declared.cpu is None
    assert (rca.sandbox.cpu_cores, rca.sandbox.memory_bytes) == (1.0, 512 * MIB)
    assert rca.disk_bytes == GIB  # the legacy workspace_quota


@pytest.mark.parametrize("config_name", ["default.toml", "demo.toml"])
def test_the_shipped_configs_give_every_app_a_cpu_memory_and_pids_size(config_name):
    # Given a config the repository ships, with the shipped app descriptors (those that need a model too)
    # When they are loaded
    config = load_config(DEFAULT_CONFIG.parent / config_name, DEFAULT_APPS_DIR, model_connected=True)
    # Then no app resolves to "no limit" in any dimension the kernel bounds
    sizes = {slug: app.resources.sandbox for slug, app in config.apps.items()}
    assert all(size.cpu_cores and size.memory_bytes and size.pids_max for size in sizes.values()), sizes


def test_the_demo_lets_a_person_open_as_many_sandboxes_of_any_app_as_its_count_says():
    # Given the demo's config (`make run`) with the shipped app descriptors, a model connected
    config = load_config(DEFAULT_CONFIG.parent / "demo.toml", DEFAULT_APPS_DIR, model_connected=True)
    limits = config.per_user

    # When a person opens `count` sandboxes of the largest app / Then cpu and memory hold them all,
    # so the page's "n of 3 sandboxes" is the limit a person meets, not a hidden cpu or memory one
    largest_cpu = max(app.resources.sandbox.cpu_cores for app in config.apps.values())
    largest_memory = max(app.resources.sandbox.memory_bytes for app in config.apps.values())
    assert limits.count * largest_cpu <= limits.cpu
    assert limits.count * largest_memory <= limits.memory


def test_resolution_takes_the_app_value_then_the_default_then_the_legacy_setting(tmp_path):
    # Given an app that declares cpu only, a per-app default for memory, and legacy [sandbox] values for all three
    # When the config is loaded
    config = _load(
        tmp_path,
        '[sandbox]\ncpu = 4\nmemory = "2G"\nworkspace_quota = "5G"\n[resources.per_app.default]\nmemory = "1G"\n',
        {"a.toml": 'slug = "a"\nname = "A"\n[resources]\ncpu = 2\n'},
    )
    resolved = config.apps["a"].resources
    # Then cpu is the app's, memory the default's, and disk the legacy workspace_quota
    assert resolved.sandbox.cpu_cores == 2.0
    assert resolved.sandbox.memory_bytes == GIB
    assert resolved.disk_bytes == 5 * GIB


def test_cpu_zero_is_unspecified_and_keeps_falling_through(tmp_path):
    # Given an app and a per-app default that both say cpu 0, and a legacy [sandbox] cpu of 3
    # When the config is loaded
    config = _load(
        tmp_path,
        "[sandbox]\ncpu = 3\n[resources.per_app.default]\ncpu = 0\n",
        {"a.toml": 'slug = "a"\nname = "A"\n[resources]\ncpu = 0\n'},
    )
    # Then 0 counts as unsaid and the app gets the legacy 3
    assert config.apps["a"].resources.sandbox.cpu_cores == 3.0


def test_disk_zero_is_unlimited_and_stops_falling_through(tmp_path):
    # Given an app that says disk 0, and a legacy workspace_quota of 1G
    # When the config is loaded
    config = _load(
        tmp_path, '[sandbox]\nworkspace_quota = "1G"\n', {"a.toml": 'slug = "a"\nname = "A"\n[resources]\ndisk = "0"\n'}
    )
    # Then 0 means unlimited and the 1G does not apply
    assert config.apps["a"].resources.disk_bytes == 0


def test_nothing_declared_resolves_cpu_and_memory_to_unspecified(tmp_path):
    # Given an app that declares no resources, under an empty config
    # When the config is loaded
    config = _load(tmp_path, "", {"a.toml": 'slug = "a"\nname = "A"\n'})
    # Then its cpu and memory are unspecified and it declares no cost
    resources = config.apps["a"].resources
    assert (resources.sandbox.cpu_cores, resources.sandbox.memory_bytes) == (None, None)
    assert not resources.sandbox.declares_cost


def test_bad_size_in_a_descriptor_fails_naming_the_file_and_key(tmp_path):
    # Given a descriptor bad.toml whose memory is 12X
    # When the config is loaded / Then it fails
    with pytest.raises(ImproperlyConfigured) as failure:
        _load(tmp_path, "", {"bad.toml": 'slug = "a"\nname = "A"\n[resources]\nmemory = "12X"\n'})
    # Then the error names the file and the key
    assert "bad.toml" in str(failure.value)
    assert "resources.memory" in str(failure.value)


def test_unknown_key_in_a_descriptor_fails_start_up(tmp_path):
    # Given a descriptor with a misspelt key, memroy
    # When the config is loaded / Then it fails naming the key
    with pytest.raises(ImproperlyConfigured, match="memroy"):
        _load(tmp_path, "", {"a.toml": 'slug = "a"\nname = "A"\n[resources]\nmemroy = "1G"\n'})


def test_an_app_chooses_its_agent_and_the_deterministic_agent_is_the_default(tmp_path):
    # Given one app asking for the model agent, one for the deterministic one, one saying nothing
    # When the config is loaded
    config = _load(
        tmp_path,
        "",
        {
            "a.toml": 'slug = "a"\nname = "A"\nagent = "model"\n',
            "b.toml": 'slug = "b"\nname = "B"\nagent = "deterministic"\n',
            "c.toml": 'slug = "c"\nname = "C"\n',
        },
    )
    # Then each has the agent it chose, and the silent one the deterministic agent
    assert [config.apps[slug].agent for slug in "abc"] == ["model", "deterministic", "deterministic"]


@pytest.mark.parametrize("value", ['"gpt"', '"Model"', "1", '["model"]'])
def test_an_unknown_agent_fails_start_up_naming_the_file_and_key(tmp_path, value):
    # Given a descriptor whose agent is neither "model" nor "deterministic"
    # When the config is loaded / Then it fails naming the file and the key
    with pytest.raises(ImproperlyConfigured, match=r"a\.toml: agent: expected \"deterministic\" or \"model\""):
        _load(tmp_path, "", {"a.toml": f'slug = "a"\nname = "A"\nagent = {value}\n'})


def test_bad_key_in_the_deployment_config_names_it(tmp_path):
    # Given a deployment config whose lease is "soon"
    # When it is loaded / Then it fails naming the file and the key
    with pytest.raises(ImproperlyConfigured, match=r"c\.toml: sandbox\.lease"):
        _load(tmp_path, '[sandbox]\nlease = "soon"\n', {"a.toml": 'slug = "a"\nname = "A"\n'})


def test_invalid_toml_fails_start_up_naming_the_file(tmp_path):
    # Given a descriptor broken.toml that is not valid TOML
    # When the config is loaded / Then it fails naming the file
    with pytest.raises(ImproperlyConfigured, match=r"broken\.toml"):
        _load(tmp_path, "", {"broken.toml": 'slug = "a\n'})


def test_two_descriptors_with_one_slug_fail_start_up(tmp_path):
    # Given two descriptors with the same slug
    # When the config is loaded / Then it fails saying the slug is already declared
    with pytest.raises(ImproperlyConfigured, match="already declared"):
        _load(tmp_path, "", {"a.toml": 'slug = "a"\nname = "A"\n', "b.toml": 'slug = "a"\nname = "B"\n'})


def test_app_above_the_ceiling_fails_start_up_naming_the_app(tmp_path):
    # Given an app big that asks 4 cpu under a per-app ceiling of 2
    # When the config is loaded / Then it fails naming the app
    with pytest.raises(ImproperlyConfigured, match=r"app 'big'"):
        _load(
            tmp_path,
            "[resources.per_app.max]\ncpu = 2\n",
            {"a.toml": 'slug = "big"\nname = "B"\n[resources]\ncpu = 4\n'},
        )


def test_default_above_its_own_max_fails_start_up(tmp_path):
    # Given a per-app default memory of 2G above a per-app max of 1G
    # When the config is loaded / Then it fails naming the default's key
    with pytest.raises(ImproperlyConfigured, match=r"per_app\.default\.memory"):
        _load(tmp_path, '[resources.per_app.default]\nmemory = "2G"\n[resources.per_app.max]\nmemory = "1G"\n', {})


def test_http_backend_without_a_host_url_fails_start_up(tmp_path):
    # Given a config that chooses the http backend and names no host
    # When it is loaded / Then it fails naming sandbox.host_url
    with pytest.raises(ImproperlyConfigured, match=r"sandbox\.host_url"):
        _load(tmp_path, '[sandbox]\nbackend = "http"\n', {})


def test_per_user_limits_are_parsed(tmp_path):
    # Given a config with per-user count, cpu, memory and disk
    # When it is loaded
    config = _load(tmp_path, '[resources.per_user]\ncount = 3\ncpu = 4\nmemory = "4G"\ndisk = "10G"\n', {})
    # Then each limit is read, sizes in bytes
    assert (config.per_user.count, config.per_user.cpu) == (3, 4.0)
    assert (config.per_user.memory, config.per_user.disk) == (4 * GIB, 10 * GIB)


def test_settings_choose_the_config_file(write_config):
    # Given the settings pointing at a config whose lease is 2m
    write_config('[sandbox]\nlease = "2m"\n')
    # When the config is read / Then its lease is two minutes
    assert get_config().sandbox.lease == timedelta(minutes=2)


@pytest.mark.parametrize(
    ("raw", "expected"), [("512M", 512 * MIB), ("1G", GIB), ("2048", 2048), ("3k", 3072), (7, 7), ("1T", 1024**4)]
)
def test_size_strings_are_powers_of_1024(raw, expected):
    # Given a size as a string with or without a unit, or a number
    # When it is parsed / Then K, M, G and T are powers of 1024 and plain numbers are bytes
    assert parse_size(raw) == expected


@pytest.mark.parametrize("raw", ["1.5G", "-1", "G", "12 parsecs", True, None])
def test_bad_size_strings_are_refused(raw):
    # Given a fractional, negative, unitless, unknown or non-string size
    # When it is parsed / Then it is refused
    with pytest.raises(SizeError):
        parse_size(raw)


def test_max_is_unlimited_only_where_allowed():
    # Given the word max
    # When it is parsed where unlimited is allowed / Then it is 0, unlimited
    assert parse_size("max", allow_max=True) == 0
    # When it is parsed anywhere else / Then it is refused
    with pytest.raises(SizeError):
        parse_size("max")


def test_a_duration_is_read_with_its_unit():
    # Given a duration of thirty minutes written as 30m
    # When it is parsed / Then it is 1800 seconds
    assert parse_duration_seconds("30m") == 1800


def test_sizes_are_written_in_words_or_with_their_unit():
    # Given no size, a size of 0 and one of 512 MiB
    # When each is formatted / Then they read unspecified, unlimited and 512 MB
    assert format_size(None) == "unspecified"
    assert format_size(0) == "unlimited"
    assert format_size(512 * MIB) == "512 MB"


def test_a_size_for_a_form_is_written_so_it_parses_back_to_the_same_bytes():
    # Given sizes with and without a whole unit
    # When each is written for a config file or an admin form
    # Then each parses back to exactly its bytes
    for value in (0, 1, 1000, 1024, 1536, 512 * MIB, 3 * 1024**3, 2**63 - 1):
        assert parse_size(size_string(value)) == value
    assert size_string(512 * MIB) == "512M"

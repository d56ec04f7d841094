"""A var directory sandbox uids cannot reach (a clone under root's 0700 home, a `mktemp -d` folder):
where the var directory goes instead, and how a server that still has one says so.

bubblewrap runs as the sandbox's uid and binds the workspace by its path, so every directory on the
way needs the x bit for others. Waiting never fixes that: start-up refuses, /healthz names the
directory and the fix, an exec answers 500 `sandbox_misconfigured`, never "try again".
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from quotas.models import SandboxActivity
from quotas.values import SandboxSize
from tests.fixtures.items import item_url
from workspace.sandboxes import volumes
from workspace.sandboxes.host import HostSettings, build_server
from workspace.sandboxes.reach import default_var_dir

pytestmark = pytest.mark.django_db


@pytest.fixture
def private_dir(tmp_path: Path) -> Path:
    """A directory only its owner may enter, as root's home or a `mktemp -d` folder."""
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    return private


@pytest.fixture
def sandbox_uids() -> None:
    """Only a root server with bubblewrap runs sandbox code as other uids."""
    missing = "the process is not root" if os.geteuid() != 0 else ""
    if not shutil.which("bwrap"):
        missing = "bubblewrap is not installed"
    if missing:
        if os.environ.get("WORKSPACE_REQUIRE_ISOLATION"):
            pytest.fail(f"sandbox uid tests must run here: {missing}")
        pytest.skip(missing)


def test_a_root_servers_var_dir_moves_to_var_lib_when_its_clone_is_private(private_dir):
    # Given two clones under a private directory
    first, second = private_dir / "clone", private_dir / "other"
    # When a root server works out where its var directory goes
    chosen = default_var_dir(first, as_root=True)
    # Then it is one directory per clone in /var/lib, outside the private directory
    assert chosen.parent == Path("/var/lib")
    assert chosen.name.startswith("workspace-")
    assert chosen == default_var_dir(first, as_root=True)
    assert chosen != default_var_dir(second, as_root=True)


def test_the_var_dir_stays_in_a_clone_sandbox_uids_can_pass_through(tmp_path):
    # Given a clone under directories everyone may pass through
    clone = tmp_path / "clone"
    clone.mkdir(mode=0o755)
    # When a root server works out where its var directory goes
    # Then it is the clone's own var/
    assert default_var_dir(clone, as_root=True) == clone / "var"


def test_an_unprivileged_servers_var_dir_stays_in_its_private_clone(private_dir):
    # Given a clone under a private directory, served by an ordinary user (sandboxes keep its uid)
    clone = private_dir / "clone"
    # When it works out where its var directory goes
    # Then it is the clone's own var/: the server's uid reaches its own clone
    assert default_var_dir(clone, as_root=False) == clone / "var"


def test_directories_made_on_the_way_to_a_workspace_are_0711_whatever_the_umask(tmp_path):
    # Given a process whose umask would make every new directory private
    previous = os.umask(0o077)
    try:
        # When the first workspace is prepared under a var directory that does not exist yet
        volumes.workspace_prepare(tmp_path / "var" / "workspaces" / "7", limit_bytes=None, uid=None)
    finally:
        os.umask(previous)
    # Then the var directory and the workspaces root let sandbox uids pass, but not list
    assert (tmp_path / "var").stat().st_mode & 0o777 == 0o711
    assert (tmp_path / "var" / "workspaces").stat().st_mode & 0o777 == 0o711


def test_start_up_refuses_a_var_dir_sandbox_uids_cannot_reach(sandbox_uids, settings, private_dir):
    # Given a root server whose var directory lies under a private directory
    settings.WORKSPACE_VAR_DIR = private_dir / "var"
    # When its start-up checks run (migrate, runserver and the worker run them)
    with pytest.raises(SystemCheckError) as refused:
        call_command("check")
    # Then it refuses, naming the directory in the way and the fix
    assert f"{private_dir} is mode 0700" in str(refused.value)
    assert f"chmod o+x {private_dir}" in str(refused.value)
    assert "WORKSPACE_VAR_DIR" in str(refused.value)


def test_start_up_accepts_a_private_var_dir_when_sandboxes_keep_the_servers_uid(
    sandbox_uids, settings, private_dir, monkeypatch
):
    # Given an ordinary user's server (its sandboxes run as its own uid) with a private var directory
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    settings.WORKSPACE_VAR_DIR = private_dir / "var"
    # When its start-up checks run
    # Then they pass: its own uid reaches its own directory
    call_command("check")


def test_an_exec_that_cannot_reach_its_workspace_is_a_500_that_says_tell_an_administrator(
    sandbox_uids, settings, private_dir, api_client_for, make_item
):
    # Given a server already running with its var directory under a private directory
    settings.WORKSPACE_VAR_DIR = private_dir / "var"
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    # When carol runs a command
    response = carol_api.post(item_url(item, "/exec"), {"command": "true"}, format="json")
    # Then she is told the service's configuration is at fault, not to wait, and nothing stays open
    assert response.status_code == 500
    body = response.json()
    assert body["error"] == "sandbox_misconfigured"
    assert "administrator" in body["detail"]
    assert "waiting will not help" in body["detail"]
    assert str(private_dir) not in body["detail"]
    assert "Retry-After" not in response
    assert not SandboxActivity.current.filter(item_id=str(item.pk)).exists()


def test_healthz_tells_staff_which_directory_blocks_sandbox_uids_and_the_fix(
    sandbox_uids, settings, private_dir, client
):
    # Given a server whose var directory lies under a private directory
    settings.WORKSPACE_VAR_DIR = private_dir / "var"
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    # When staff ask for health
    body = client.get("/healthz", HTTP_X_USER_ID="alice").json()
    # Then the sandbox check fails, naming the directory and the fix
    assert body["sandbox_backend"] == "failing"
    assert f"chmod o+x {private_dir}" in body["detail"]


def test_a_sandbox_host_refuses_to_start_with_workspaces_sandbox_uids_cannot_reach(sandbox_uids, private_dir):
    # Given sandbox host settings whose workspaces lie under a private directory
    chosen = HostSettings(defaults=SandboxSize(), workspace_root=private_dir / "ws", state_dir=private_dir / "state")
    # When the host is started
    # Then it refuses, naming the directory, the fix and its own setting
    with pytest.raises(ImproperlyConfigured, match="SANDBOX_HOST_WORKSPACES") as refused:
        build_server("127.0.0.1", 0, chosen)
    assert f"chmod o+x {private_dir}" in str(refused.value)


def test_a_sandbox_host_that_cannot_reach_its_workspaces_is_a_500_for_the_app_too(
    sandbox_uids, tmp_path, host, write_config, api_client_for, make_item
):
    # Given the app on a sandbox host whose workspaces became unreachable after it started
    write_config(f'[sandbox]\nbackend = "http"\nhost_url = "{host}"\n')
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    tmp_path.chmod(0o700)
    try:
        # When carol runs a command
        response = carol_api.post(item_url(item, "/exec"), {"command": "true"}, format="json")
    finally:
        tmp_path.chmod(0o711)
    # Then the host's configuration fault reaches her as one, not as "try again"
    assert response.status_code == 500
    assert response.json()["error"] == "sandbox_misconfigured"

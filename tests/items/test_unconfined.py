"""Without bubblewrap: refused outside DEBUG; in DEBUG a warning at start-up and a banner on item pages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.fixtures.items import item_url
from workspace.sandboxes.boundary import boundary_warnings, configured_boundary

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_bubblewrap_is_refused_outside_debug(settings):
    # Given a server without DEBUG whose bubblewrap is missing
    settings.DEBUG = False
    settings.WORKSPACE_BWRAP = "/nonexistent/bwrap"
    # When the boundary is built / Then it refuses and says what to install
    with pytest.raises(ImproperlyConfigured, match="apt-get install bubblewrap"):
        configured_boundary()


def test_isolation_none_is_refused_outside_debug(settings):
    # Given a server without DEBUG whose isolation setting is none
    settings.DEBUG = False
    settings.WORKSPACE_SANDBOX_ISOLATION = "none"
    # When the boundary is built / Then it refuses, naming the setting
    with pytest.raises(ImproperlyConfigured, match="is set to 'none'"):
        configured_boundary()


def test_an_unknown_isolation_setting_is_refused(settings):
    # Given an isolation setting that names docker
    settings.WORKSPACE_SANDBOX_ISOLATION = "docker"
    # When the boundary is built / Then it refuses, naming the two it knows
    with pytest.raises(ImproperlyConfigured, match="'bwrap' or 'none'"):
        configured_boundary()


def test_the_service_does_not_start_without_bubblewrap_outside_debug(tmp_path):
    # Given a production-like environment with no bubblewrap
    env = {
        **os.environ,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "test-only",
        "WORKSPACE_ALLOW_MOCK_IDENTITY": "1",
        "WORKSPACE_BWRAP": "/nonexistent/bwrap",
        "WORKSPACE_VAR_DIR": str(tmp_path),
    }
    # When Django starts
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    # Then it stops with the reason
    assert done.returncode != 0
    assert "bubblewrap" in done.stderr


def test_debug_without_bubblewrap_warns_at_start_up_that_commands_run_unconfined(settings):
    # Given DEBUG on and no bubblewrap
    settings.DEBUG = True
    settings.WORKSPACE_SANDBOX_ISOLATION = "none"
    # When the boundary is built
    (warning,) = boundary_warnings(configured_boundary())
    # Then start-up gets a warning that says what is lost
    assert "WITHOUT bubblewrap" in warning


@pytest.mark.django_db
def test_item_pages_show_a_banner_when_sandboxes_are_unconfined(settings, client, make_item):
    # Given DEBUG on and no bubblewrap
    settings.DEBUG = True
    settings.WORKSPACE_SANDBOX_ISOLATION = "none"
    item = make_item()
    # When its creator opens the item page
    page = client.get(item_url(item), HTTP_X_USER_ID="alice", HTTP_ACCEPT="text/html").content.decode()
    # Then a banner says sandboxes run without bubblewrap
    assert 'data-testid="unconfined-banner"' in page


@pytest.mark.django_db
def test_item_pages_show_no_banner_when_sandboxes_are_confined(settings, client, make_item):
    # Given a host with bubblewrap (the test skips without it), and alice's notebook
    if not configured_boundary().enabled:
        pytest.skip("bubblewrap is not installed")
    # When she opens the item page
    page = client.get(item_url(make_item()), HTTP_X_USER_ID="alice", HTTP_ACCEPT="text/html").content.decode()
    # Then it shows no unconfined banner
    assert "unconfined-banner" not in page


@pytest.mark.django_db
def test_debug_without_bubblewrap_still_runs_commands(settings, alice_api, make_item):
    # Given DEBUG on and no bubblewrap, and alice's notebook
    settings.DEBUG = True
    settings.WORKSPACE_SANDBOX_ISOLATION = "none"
    # When she runs a command
    item = make_item()
    response = alice_api.post(item_url(item, "/exec"), {"command": "echo plain"}, format="json")
    # Then it runs
    assert (response.status_code, response.json()["stdout"]) == (200, "plain\n")

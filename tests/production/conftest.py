"""The production run: gunicorn workers and worker processes on a throwaway PostgreSQL database.

These tests start real processes on free loopback ports and need a PostgreSQL server on
127.0.0.1:5432 (PRODUCTION_TEST_SERVER_URL names another); without one they skip, saying why.
They run under `make test` too: they never use the test database, only their own throwaway one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.live import DEFAULT_SERVER_URL, migrated_database, postgres_reachable, production_env, run_django

SERVER_URL = os.environ.get("PRODUCTION_TEST_SERVER_URL", DEFAULT_SERVER_URL)
STAFF, STAFF_PASSWORD = "ops", "ops-secret-1"
USER, USER_PASSWORD = "bob", "bob-secret-1"

ACCOUNTS = f"""
from django.contrib.auth.models import User
User.objects.create_user({STAFF!r}, password={STAFF_PASSWORD!r}, is_staff=True)
User.objects.create_user({USER!r}, password={USER_PASSWORD!r})
"""


@pytest.fixture(scope="module")
def deployment(traversable_tmp: Path) -> Iterator[dict[str, str]]:
    """The environment of `make serve` over a fresh, migrated database with a staff and a plain account."""
    if not postgres_reachable(SERVER_URL):
        pytest.skip(f"needs a PostgreSQL server at {SERVER_URL}")
    home = Path(tempfile.mkdtemp(prefix="production", dir=traversable_tmp))
    home.chmod(0o711)
    var_dir = home / "var"
    with migrated_database(SERVER_URL, prefix="ws_production_test") as url:
        env = production_env(url, var_dir, WORKSPACE_SERVE_PREPARE="0", WORKSPACE_SERVE_WORKER="0")
        run_django(ACCOUNTS, env)
        yield env

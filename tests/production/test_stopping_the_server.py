"""Stopping the app server (issue 47 point 8): `make run`'s Ctrl-C leaves no sandbox running, while
production's sandboxes outlive a restart of its app processes (WORKSPACE_SERVE_RELEASE_SANDBOXES)."""

from __future__ import annotations

import json
import os
import signal

import pytest

from bench.live import Client, close_sandboxes, gunicorn, run_django
from tests.production.conftest import USER, USER_PASSWORD
from workspace.sandboxes.runner import marked_pids

pytestmark = pytest.mark.postgres

# A give-up bound for a loaded machine, never a speed the test asserts.
GIVE_UP_SECONDS = 60

LOCAL_SANDBOXES = """
import json
from workspace.sandboxes.registry import backend_named
print(json.dumps(sorted(backend_named("local").sandboxes())))
"""


def _open_a_sandbox(port: int) -> None:
    client = Client(port, timeout=GIVE_UP_SECONDS)
    try:
        client.login(USER, USER_PASSWORD)
        created = client.request("POST", "/a/notebook/items", {"title": "left running"})
        assert created.status == 201, created.body
        ran = client.request("POST", f"/a/notebook/items/{created.json()['id']}/exec", {"command": "true"})
        assert ran.status == 200, ran.body
    finally:
        # An open keep-alive connection would hold the server's shutdown for its whole grace period.
        client.close()


def _local_sandboxes(env: dict[str, str]) -> list[str]:
    return json.loads(run_django(LOCAL_SANDBOXES, env))


@pytest.mark.parametrize(("release", "left_running"), [("1", False), ("0", True)], ids=["make run", "production"])
def test_stopping_the_server_closes_its_sandboxes_only_where_it_was_asked_to(
    deployment, tmp_path, release, left_running
):
    # Given a server started with WORKSPACE_SERVE_RELEASE_SANDBOXES as `make run` sets it (1) or as
    # production leaves it (0), and bob's command having opened a sandbox
    env = {**deployment, "WORKSPACE_SERVE_RELEASE_SANDBOXES": release}
    try:
        with gunicorn(env, tmp_path / "gunicorn.log", workers=1) as server:
            _open_a_sandbox(server.port)
            (sandbox_id,) = _local_sandboxes(env)
            assert marked_pids(sandbox_id)

            # When the server is stopped as Ctrl-C stops it (SIGINT to the terminal's whole process group)
            os.killpg(server.process.pid, signal.SIGINT)
            server.process.wait(GIVE_UP_SECONDS)

        # Then under `make run` no sandbox and none of its processes is left; in production the
        # sandbox is still there for the next app process
        assert bool(_local_sandboxes(env)) is left_running
        assert bool(marked_pids(sandbox_id)) is left_running
    finally:
        close_sandboxes(env)

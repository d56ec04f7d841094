"""The HTTP backend against a real sandbox host on loopback, and a host that is down."""

from __future__ import annotations

import json
import socket
import threading
import urllib.request
from pathlib import Path

import pytest

from quotas import ledger
from quotas.models import SandboxActivity
from tests.workspace.conftest import item_url
from workspace.sandboxes.base import SandboxSpec
from workspace.sandboxes.host import HostSettings, build_server
from workspace.sandboxes.http import HttpBackend

GIB = 1024**3


@pytest.fixture
def host(workspace_dirs: Path):
    """A sandbox host on a free loopback port, sharing the app's workspace directories."""
    chosen = HostSettings(
        defaults=SandboxSpec(cpu_cores=2.0, memory_bytes=GIB, pids_max=100),
        workspace_root=workspace_dirs / "workspaces",
        state_dir=workspace_dirs / "host-state",
    )
    server = build_server("127.0.0.1", 0, chosen)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    yield url
    backend = HttpBackend(url)
    for entry in (workspace_dirs / "host-state").glob("*"):
        backend.close(entry.name)
    server.shutdown()
    server.server_close()


@pytest.fixture
def http_config(write_config, host):
    write_config(f'[sandbox]\nbackend = "http"\nhost_url = "{host}"\n')
    return host


def _call(url: str, method: str = "GET", body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else {}
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_healthz_reports_the_hosts_defaults(host):
    status, body = _call(f"{host}/healthz")
    assert status == 200
    assert body["defaults"] == {"cpu_cores": 2.0, "memory_bytes": GIB, "pids_max": 100}


def test_the_host_uses_supplied_values_and_ignores_unknown_fields(host):
    status, body = _call(f"{host}/sandboxes", "POST", {"item_id": "5", "cpu": 0.5, "memory": "256M", "gpu": 8})
    assert status == 201
    assert (body["cpu_cores"], body["memory_bytes"], body["pids_max"]) == (0.5, 256 * 1024**2, 100)


def test_the_host_falls_back_to_its_defaults_for_null_values(host):
    _status, body = _call(f"{host}/sandboxes", "POST", {"item_id": "5", "cpu": None, "memory": None})
    assert (body["cpu_cores"], body["memory_bytes"]) == (2.0, GIB)


def test_the_host_reports_alive_runs_commands_and_deletes(host):
    _status, created = _call(f"{host}/sandboxes", "POST", {"item_id": "9"})
    sandbox = f"{host}/sandboxes/{created['id']}"
    assert _call(sandbox) == (200, {"id": created["id"], "alive": True})
    status, result = _call(f"{sandbox}/exec", "POST", {"command": ["echo", "hi"]})
    assert (status, result["stdout"]) == (200, "hi\n")
    assert _call(sandbox, "DELETE")[0] == 204
    assert _call(sandbox)[0] == 404


def test_the_host_refuses_a_bad_create_with_400(host):
    assert _call(f"{host}/sandboxes", "POST", {"item_id": "../x"})[0] == 400
    assert _call(f"{host}/sandboxes", "POST", {"item_id": "1", "memory": "lots"})[0] == 400


@pytest.mark.django_db
def test_exec_through_the_http_backend_runs_on_the_host(alice_api, make_item, http_config):
    item = make_item()
    alice_api.put(item_url(item, "/files/x.txt"), b"x", content_type="application/octet-stream")
    body = alice_api.post(item_url(item, "/exec"), {"command": "ls"}, format="json").json()
    assert body["stdout"] == "x.txt\n"
    row = ledger.live_row_of_item(item.pk)
    assert (row.backend, row.backend_sandbox_id) == ("http", body["sandbox_id"])


@pytest.mark.django_db
def test_undeclared_cpu_and_memory_go_as_null_and_the_hosts_enforced_values_are_charged(
    alice_api, make_item, http_config, monkeypatch
):
    sent = []
    original = HttpBackend._call

    def spy(self, method, path, body=None, **kwargs):
        if path == "/sandboxes":
            sent.append(body)
        return original(self, method, path, body, **kwargs)

    monkeypatch.setattr(HttpBackend, "_call", spy)
    item = make_item(app_slug="rca")
    alice_api.post(item_url(item, "/exec"), {"command": "true"}, format="json")
    assert (sent[0]["cpu"], sent[0]["memory"]) == (None, None)
    row = ledger.live_row_of_item(item.pk)
    assert (row.cpu_cores, row.memory_bytes) == (2.0, GIB)


@pytest.mark.django_db
def test_closing_through_the_api_deletes_the_sandbox_on_the_host(alice_api, make_item, http_config):
    item = make_item()
    sandbox_id = alice_api.post(item_url(item, "/exec"), {"command": "true"}, format="json").json()["sandbox_id"]
    assert alice_api.delete(item_url(item, "/sandbox")).status_code == 204
    assert _call(f"{http_config}/sandboxes/{sandbox_id}")[0] == 404


@pytest.mark.django_db
def test_a_host_that_is_down_gives_a_clear_503_and_nothing_live(alice_api, make_item, write_config):
    write_config(f'[sandbox]\nbackend = "http"\nhost_url = "http://127.0.0.1:{_free_port()}"\n')
    item = make_item()
    response = alice_api.post(item_url(item, "/exec"), {"command": "ls"}, format="json")
    assert response.status_code == 503
    assert response.json()["error"] == "sandbox_host_unavailable"
    assert ledger.live_rows_of_owner("alice").count() == 0
    assert SandboxActivity.objects.get().close_reason == "failed"


def test_runsandboxhost_serves_the_protocol_with_defaults_from_the_environment(tmp_path):
    import os
    import subprocess
    import sys
    import time

    port = _free_port()
    env = {
        **os.environ,
        "SANDBOX_HOST_CPU": "1.5",
        "SANDBOX_HOST_MEMORY": "256M",
        "WORKSPACE_VAR_DIR": str(tmp_path / "host-var"),
        "WORKSPACE_LOG_LEVEL": "WARNING",
    }
    manage = Path(__file__).resolve().parents[2] / "manage.py"
    process = subprocess.Popen(
        [sys.executable, str(manage), "runsandboxhost", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                status, body = _call(f"http://127.0.0.1:{port}/healthz")
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.1)
        assert status == 200
        assert (body["defaults"]["cpu_cores"], body["defaults"]["memory_bytes"]) == (1.5, 256 * 1024**2)
    finally:
        process.terminate()
        process.wait(timeout=10)

"""The HTTP backend against a real sandbox host on loopback, and a host that is down."""

from __future__ import annotations

import io
import json
import os
import socket
import threading
import urllib.parse
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from collab import clock
from quotas import ledger
from quotas.models import SandboxActivity
from quotas.values import SandboxSize
from tests.fixtures.items import HOST_CAPACITY, item_url
from tests.fixtures.items import SANDBOX_HOST_TOKEN as TOKEN
from tests.fixtures.items import host_call as _call
from tests.fixtures.quotas import GIB
from workspace.items import lifecycle
from workspace.items.models import SandboxHost
from workspace.sandboxes import host as host_module
from workspace.sandboxes.base import HostCapacity
from workspace.sandboxes.host import HostSettings, build_server, configured_capacity
from workspace.sandboxes.http import HttpBackend


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_healthz_reports_the_hosts_defaults(host):
    # Given a sandbox host started with defaults of 2 cpu, 1 GiB and 100 pids
    # When its health is asked
    status, body = _call(f"{host}/healthz")
    # Then it answers 200 with those defaults
    assert status == 200
    assert body["defaults"] == {"cpu_cores": 2.0, "memory_bytes": GIB, "pids_max": 100}


def test_healthz_reports_what_the_host_offers_a_pool(host):
    # Given a sandbox host offering 8 cores, 16 GiB and 10 sandboxes
    # When its health is asked, raw and through the app's client
    _status, body = _call(f"{host}/healthz")
    # Then both say that capacity
    assert body["capacity"] == {"cpu_cores": 8.0, "memory_bytes": 16 * GIB, "sandboxes": 10}
    assert HttpBackend(host, token=TOKEN).host_capacity() == HOST_CAPACITY


def test_a_hosts_capacity_defaults_to_the_machines_cores_and_memory(settings):
    # Given no capacity settings
    settings.SANDBOX_HOST_CAPACITY_CPU = settings.SANDBOX_HOST_CAPACITY_MEMORY = ""
    settings.SANDBOX_HOST_CAPACITY_SANDBOXES = ""
    # When the host reads its capacity / Then it is the cores it may run on, all memory, no count bound
    assert configured_capacity() == HostCapacity(
        cpu_cores=float(len(os.sched_getaffinity(0))),
        memory_bytes=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        sandboxes=None,
    )


def test_a_hosts_capacity_settings_are_read_with_sizes(settings):
    # Given 6 cores, 12G and 20 sandboxes offered
    settings.SANDBOX_HOST_CAPACITY_CPU, settings.SANDBOX_HOST_CAPACITY_MEMORY = "6", "12G"
    settings.SANDBOX_HOST_CAPACITY_SANDBOXES = "20"
    # When the host reads its capacity / Then it is what was offered
    assert configured_capacity() == HostCapacity(cpu_cores=6.0, memory_bytes=12 * GIB, sandboxes=20)


@pytest.mark.parametrize(
    ("cpu", "memory", "count"),
    [("many", "", ""), ("0", "", ""), ("-2", "", ""), ("nan", "", ""), ("", "lots", ""), ("", "0", ""), ("", "", "0")],
)
def test_a_capacity_that_makes_no_sense_stops_the_host_from_starting(settings, cpu, memory, count):
    # Given a capacity setting that is no number, zero, negative or NaN
    settings.SANDBOX_HOST_CAPACITY_CPU, settings.SANDBOX_HOST_CAPACITY_MEMORY = cpu, memory
    settings.SANDBOX_HOST_CAPACITY_SANDBOXES = count
    # When the host reads its capacity / Then it refuses to start, naming the settings
    with pytest.raises(ImproperlyConfigured, match="SANDBOX_HOST_CAPACITY"):
        configured_capacity()


@pytest.mark.parametrize(
    "reported",
    [
        None,
        "8 cores",
        {"cpu_cores": 8},
        {"cpu_cores": True, "memory_bytes": GIB},
        {"cpu_cores": float("nan"), "memory_bytes": GIB},
        {"cpu_cores": float("inf"), "memory_bytes": GIB},
        {"cpu_cores": 8, "memory_bytes": 10**400},
        {"cpu_cores": 8, "memory_bytes": GIB, "sandboxes": 0},
        {"cpu_cores": 8, "memory_bytes": GIB, "sandboxes": 2.5},
    ],
)
def test_a_capacity_report_that_makes_no_sense_reads_as_none(reported):
    # Given a host (older, or broken) that reports no capacity or nonsense
    # When the app reads it / Then it has no capacity to place by, rather than a crash or a wrong one
    assert HostCapacity.from_report(reported) is None


def test_the_host_uses_supplied_values_and_ignores_unknown_fields(host):
    # Given a sandbox host
    # When a sandbox is created with cpu, memory and a field the protocol does not know
    status, body = _call(f"{host}/sandboxes", "POST", {"item_id": "5", "cpu": 0.5, "memory": "256M", "gpu": 8})
    # Then it is made with the values supplied, the default pids, and the unknown field ignored
    assert status == 201
    assert (body["cpu_cores"], body["memory_bytes"], body["pids_max"]) == (0.5, 256 * 1024**2, 100)


def test_the_host_falls_back_to_its_defaults_for_null_values(host):
    # Given a sandbox host with defaults of 2 cpu and 1 GiB
    # When a sandbox is created with cpu and memory null
    _status, body = _call(f"{host}/sandboxes", "POST", {"item_id": "5", "cpu": None, "memory": None})
    # Then it gets the host's defaults
    assert (body["cpu_cores"], body["memory_bytes"]) == (2.0, GIB)


def test_the_host_reports_alive_runs_commands_and_deletes(host):
    # Given a sandbox created on the host
    _status, created = _call(f"{host}/sandboxes", "POST", {"item_id": "9"})
    sandbox = f"{host}/sandboxes/{created['id']}"
    # When it is probed / Then it is alive
    assert _call(sandbox) == (200, {"id": created["id"], "alive": True})
    # When a command runs in it
    status, result = _call(f"{sandbox}/exec", "POST", {"command": ["echo", "hi"]})
    # Then its output comes back
    assert (status, result["stdout"]) == (200, "hi\n")
    # When it is deleted / Then it is 204
    assert _call(sandbox, "DELETE")[0] == 204
    # Then probing it is 404
    assert _call(sandbox)[0] == 404


def test_release_sandboxes_closes_what_a_host_left_in_its_state_directory(host, workspace_dirs):
    # Given a sandbox a host opened (a host's sandboxes outlive its process)
    _status, created = _call(f"{host}/sandboxes", "POST", {"item_id": "9"})
    sandbox = f"{host}/sandboxes/{created['id']}"
    assert _call(sandbox)[1]["alive"] is True
    # When release_sandboxes is told that host's state directory
    out = io.StringIO()
    call_command("release_sandboxes", host_state_dir=[workspace_dirs / "host-state"], stdout=out)
    # Then that sandbox is closed, and counted
    assert out.getvalue().startswith("closed 1 sandboxes")
    assert _call(sandbox)[0] == 404


def test_the_host_refuses_a_bad_create_with_400(host):
    # Given a sandbox host
    # When a sandbox is created for an item id that climbs out / Then it is 400
    assert _call(f"{host}/sandboxes", "POST", {"item_id": "../x"})[0] == 400
    # When one is created with a memory that is no size / Then it is 400 too
    assert _call(f"{host}/sandboxes", "POST", {"item_id": "1", "memory": "lots"})[0] == 400


@pytest.mark.django_db
def test_exec_through_the_http_backend_runs_on_the_host(alice_api, make_item, http_config):
    # Given deployment config that runs sandboxes on the host, and alice's x.txt
    item = make_item()
    alice_api.put(item_url(item, "/files/x.txt"), b"x", content_type="application/octet-stream")
    # When she runs ls
    body = alice_api.post(item_url(item, "/exec"), {"command": "ls"}, format="json").json()
    # Then it lists her workspace, and the live ledger row names the http backend and the host's sandbox id
    assert body["stdout"] == "x.txt\n"
    row = ledger.live_row_of_item(item.pk)
    assert (row.backend, row.backend_sandbox_id) == ("http", body["sandbox_id"])


@pytest.mark.django_db
def test_undeclared_cpu_and_memory_go_as_null_and_the_hosts_enforced_values_are_charged(
    alice_api, make_item, http_config, monkeypatch
):
    # Given requests to the host watched, and the deployment using it
    sent = []
    original = HttpBackend._call

    def spy(self, method, path, body=None, **kwargs):
        if path == "/sandboxes":
            sent.append(body)
        return original(self, method, path, body, **kwargs)

    monkeypatch.setattr(HttpBackend, "_call", spy)
    # Given alice's rca item, whose app declares no cpu or memory
    item = make_item(app_slug="rca")
    # When she runs a command
    alice_api.post(item_url(item, "/exec"), {"command": "true"}, format="json")
    # Then the host was sent null for both, and the ledger charges what the host enforced
    assert (sent[0]["cpu"], sent[0]["memory"]) == (None, None)
    row = ledger.live_row_of_item(item.pk)
    assert (row.cpu_cores, row.memory_bytes) == (2.0, GIB)


@pytest.mark.django_db
def test_closing_through_the_api_deletes_the_sandbox_on_the_host(alice_api, make_item, http_config):
    # Given alice's notebook with a sandbox open on the host
    item = make_item()
    sandbox_id = alice_api.post(item_url(item, "/exec"), {"command": "true"}, format="json").json()["sandbox_id"]
    # When she closes it / Then it is 204
    assert alice_api.delete(item_url(item, "/sandbox")).status_code == 204
    # Then the host no longer has it
    assert _call(f"{http_config}/sandboxes/{sandbox_id}")[0] == 404


@pytest.mark.django_db
def test_a_host_that_is_down_gives_a_503_naming_it_with_retry_after_and_nothing_live(
    alice_api, make_item, write_config
):
    # Given deployment config naming a host on a port where nothing listens, and alice's notebook
    port = _free_port()
    write_config(f'[sandbox]\nbackend = "http"\nhost_url = "http://127.0.0.1:{port}"\n')
    item = make_item()
    # When she runs a command
    response = alice_api.post(item_url(item, "/exec"), {"command": "ls"}, format="json")
    # Then it is 503 sandbox_host_unreachable naming the host (address and port, not its URL), with
    # Retry-After, and nothing is live or counted
    assert response.status_code == 503
    assert response.json()["error"] == "sandbox_host_unreachable"
    assert response.json()["host"] == f"127.0.0.1:{port}"
    assert f"127.0.0.1:{port}" in response.json()["detail"]
    assert response["Retry-After"] == "30"
    assert ledger.live_rows_of_payer("alice").count() == 0
    assert not SandboxActivity.current.exists()


@pytest.mark.django_db
def test_a_host_found_down_while_opening_is_named_and_its_attempt_recorded_as_failed(
    alice_api, make_item, write_config
):
    # Given a one-host config whose host answered its health call a moment ago, then went away
    port = _free_port()
    write_config(f'[sandbox]\nbackend = "http"\nhost_url = "http://127.0.0.1:{port}"\n')
    url = f"http://127.0.0.1:{port}"
    now = clock.now()
    SandboxHost.objects.create(
        url=url, report={"capacity": HOST_CAPACITY.as_dict()}, seen_at=now, checked_at=now, answered=True
    )
    item = make_item()
    # When she runs a command
    response = alice_api.post(item_url(item, "/exec"), {"command": "ls"}, format="json")
    # Then it is 503 sandbox_host_unreachable naming the host, the attempt is recorded as failed and
    # the host takes no new sandbox until it answers again
    assert response.status_code == 503
    assert (response.json()["error"], response.json()["host"]) == ("sandbox_host_unreachable", f"127.0.0.1:{port}")
    assert SandboxActivity.objects.get().close_reason == "failed"
    assert ledger.live_rows_of_payer("alice").count() == 0
    assert SandboxHost.objects.get(url=url).problem


def test_runsandboxhost_serves_the_protocol_with_defaults_from_the_environment(tmp_path):
    import os
    import subprocess
    import sys
    import time

    # Given runsandboxhost started on a free port with cpu and memory defaults from its environment
    port = _free_port()
    env = {
        **os.environ,
        "SANDBOX_HOST_CPU": "1.5",
        "SANDBOX_HOST_MEMORY": "256M",
        "SANDBOX_HOST_CAPACITY_CPU": "6",
        "SANDBOX_HOST_CAPACITY_MEMORY": "3G",
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
        # When its health is asked once it listens
        deadline = time.monotonic() + 20
        while True:
            try:
                status, body = _call(f"http://127.0.0.1:{port}/healthz")
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.1)
        # Then it answers 200 with the defaults and the capacity from the environment
        assert status == 200
        assert (body["defaults"]["cpu_cores"], body["defaults"]["memory_bytes"]) == (1.5, 256 * 1024**2)
        assert body["capacity"] == {"cpu_cores": 6.0, "memory_bytes": 3 * GIB, "sandboxes": None}
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_call_without_the_shared_token_is_refused_and_opens_nothing(host, workspace_dirs):
    # Given a host with a token
    # When callers send no token, a wrong one, or a token for another scheme
    answers = [
        _call(f"{host}/sandboxes", "POST", {"item_id": "5"}, token=""),
        _call(f"{host}/sandboxes", "POST", {"item_id": "5"}, token="guess"),
        _call(f"{host}/healthz", token=""),
    ]
    # Then each gets 401 and no sandbox exists
    assert [status for status, _ in answers] == [401, 401, 401]
    assert answers[0][1]["error"] == "unauthorized"
    assert not list((workspace_dirs / "host-state").glob("loc-*"))


def test_the_host_refuses_to_listen_beyond_loopback_without_a_token(workspace_dirs):
    # Given host settings without a token
    chosen = HostSettings(SandboxSize(), workspace_dirs / "workspaces", workspace_dirs / "host-state")
    # When it is asked to listen on every address / Then it refuses to start
    with pytest.raises(ImproperlyConfigured, match="without a token"):
        build_server("0.0.0.0", 0, chosen)


def test_runsandboxhost_exits_with_the_reason_when_bound_beyond_loopback_without_a_token(settings):
    # Given no host token in the settings
    settings.WORKSPACE_SANDBOX_HOST_TOKEN = ""
    # When runsandboxhost is told to bind every address / Then it exits saying there is no token
    with pytest.raises(CommandError, match="without a token"):
        call_command("runsandboxhost", "--bind", "0.0.0.0", "--port", "0")


def test_sandboxes_of_the_host_run_inside_the_boundary(host):
    # Given a sandbox opened through the host
    _status, created = _call(f"{host}/sandboxes", "POST", {"item_id": "12"})
    # When it reports its uid and what it sees
    _status, result = _call(f"{host}/sandboxes/{created['id']}/exec", "POST", {"command": "id -u; ls /; hostname"})
    # Then it is the host's boundary: its own uid when root, only system dirs, its own hostname
    uid, *rest = result["stdout"].split()
    assert int(uid) != 0 or os.geteuid() != 0
    assert "workspace" in rest
    assert rest[-1] == "sandbox"


def test_the_host_lists_its_sandboxes_by_age(host):
    # Given a sandbox just opened on the host
    _status, created = _call(f"{host}/sandboxes", "POST", {"item_id": "21"})
    # When the app asks for sandboxes older than none and older than an hour
    everything = _call(f"{host}/sandboxes?older_than=0")
    old_only = _call(f"{host}/sandboxes?older_than=3600")
    # Then only the first list holds it; a bad age is a 400
    assert everything == (200, {"sandboxes": [created["id"]]})
    assert old_only == (200, {"sandboxes": []})
    assert _call(f"{host}/sandboxes?older_than=soon")[0] == 400


@pytest.mark.django_db
def test_reconciliation_closes_an_orphan_the_host_runs_without_a_ledger_row(http_config):
    # Given a sandbox the host opened after the app had given up waiting (no ledger row)
    _status, orphan = _call(f"{http_config}/sandboxes", "POST", {"item_id": "22"})
    # When the worker reconciles
    closed = lifecycle.sandboxes_reconcile(older_than=timedelta(0)).closed
    # Then the host no longer runs it
    assert closed == 1
    assert _call(f"{http_config}/sandboxes/{orphan['id']}")[0] == 404


def test_a_deeply_nested_body_is_a_400_and_opens_nothing(host, workspace_dirs):
    # Given a host; When a caller with the token sends JSON nested ten thousand deep
    request = urllib.request.Request(f"{host}/sandboxes", method="POST", data=b"[" * 10_000 + b"]" * 10_000)
    request.add_header("Authorization", f"Bearer {TOKEN}")
    try:
        urllib.request.urlopen(request, timeout=10)
        status = 200
    except urllib.error.HTTPError as exc:
        status = exc.code
    # Then it is refused as a bad request and no sandbox exists
    assert status == 400
    assert not list((workspace_dirs / "host-state").glob("loc-*"))


def _raw(url: str, request: bytes) -> tuple[int, dict]:
    """Sends `request` as it is (headers a client library would never write) and reads one answer."""
    address = urllib.parse.urlsplit(url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as connection:
        connection.sendall(request)
        connection.shutdown(socket.SHUT_WR)
        return _answer(connection)


def _answer(connection: socket.socket) -> tuple[int, dict]:
    """One reply, read until the host closes the connection (it does after every refusal)."""
    answer = b""
    while chunk := connection.recv(65536):
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def _post_with(headers: str, body: bytes = b"") -> bytes:
    return (
        f"POST /sandboxes HTTP/1.1\r\nHost: sandbox-host\r\nAuthorization: Bearer {TOKEN}\r\n{headers}\r\n"
    ).encode() + body


@pytest.mark.parametrize(
    "headers",
    [
        "Content-Length: -1\r\n",
        "Content-Length: 12abc\r\n",
        "Content-Length: 1e3\r\n",
        "Content-Length: 5\r\nContent-Length: 6\r\n",
        "Content-Length: 99999999999999999999999\r\n",
        "Transfer-Encoding: chunked\r\n",
    ],
    ids=["negative", "not-a-number", "exponent", "conflicting", "too-long", "chunked"],
)
def test_a_malformed_content_length_is_a_400_with_a_json_error_and_opens_nothing(host, workspace_dirs, headers):
    # Given a host; When a caller with the token sends a create whose body length cannot be taken
    status, body = _raw(host, _post_with(headers, b'{"item_id": "5"}'))
    # Then it is a 400 that says why, and no sandbox exists
    assert (status, body["error"]) == (400, "bad_request")
    assert body["detail"]
    assert not list((workspace_dirs / "host-state").glob("loc-*"))


def test_a_body_shorter_than_its_content_length_is_a_400(host, workspace_dirs):
    # Given a host; When a caller announces 100 bytes, sends 16 and stops
    status, body = _raw(host, _post_with("Content-Length: 100\r\n", b'{"item_id": "5"}'))
    # Then it is a 400 and nothing opened
    assert (status, body["error"]) == (400, "bad_request")
    assert not list((workspace_dirs / "host-state").glob("loc-*"))


def test_a_malformed_request_line_is_answered_in_json(host):
    # Given a host; When a client sends a request line that is not HTTP
    status, body = _raw(host, b"NOT HTTP AT ALL\r\n\r\n")
    # Then the stdlib's refusal comes back as a JSON error, not an HTML page
    assert status == 400
    assert body["error"] == "bad_request"


@pytest.mark.parametrize(
    ("field", "raw"),
    [("cpu", "NaN"), ("cpu", "Infinity"), ("cpu", "1e308"), ("pids", "1e20"), ("memory", "1" + "0" * 400)],
    ids=["nan-cpu", "infinite-cpu", "huge-cpu", "huge-pids", "400-digit-memory"],
)
def test_a_size_no_kernel_takes_is_a_400_not_a_server_error(host, workspace_dirs, field, raw):
    # Given a host; When a sandbox is asked for with a value JSON allows but no cgroup takes
    body = f'{{"item_id": "5", "{field}": {raw}}}'.encode()
    status, answer = _raw(host, _post_with(f"Content-Length: {len(body)}\r\n", body))
    # Then it is a 400 naming the field, and nothing opened
    assert (status, answer["error"]) == (400, "bad_request")
    assert field in answer["detail"]
    assert not list((workspace_dirs / "host-state").glob("loc-*"))


def test_an_exec_timeout_of_infinity_is_a_400(host):
    # Given a sandbox on the host
    _status, created = _call(f"{host}/sandboxes", "POST", {"item_id": "5"})
    body = b'{"command": "true", "timeout": Infinity}'
    request = (
        f"POST /sandboxes/{created['id']}/exec HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    # When an exec asks for an endless timeout / Then it is refused as a bad request
    assert _raw(host, request)[0] == 400


def test_a_stalled_body_frees_its_thread_with_a_408(host, monkeypatch):
    # Given a host that waits half a second for a body to arrive
    monkeypatch.setattr(host_module._Handler, "timeout", 0.5)
    address = urllib.parse.urlsplit(host)
    with socket.create_connection((address.hostname, address.port), timeout=10) as connection:
        # When a caller announces 100 bytes, sends 16 and then nothing, keeping the connection open
        connection.sendall(_post_with("Content-Length: 100\r\n", b'{"item_id": "5"}'))
        status, body = _answer(connection)
    # Then the host gives up on it with a 408 in JSON
    assert (status, body["error"]) == (408, "request_timeout")


def test_a_host_without_defaults_runs_sandboxes_sent_without_a_size_under_its_cap(settings, workspace_dirs):
    # Given a host with no cpu or memory defaults, under a cap of 1 core and 128M
    settings.WORKSPACE_SANDBOX_CAP_CPU = "1"
    settings.WORKSPACE_SANDBOX_CAP_MEMORY = "128M"
    chosen = HostSettings(SandboxSize(), workspace_dirs / "workspaces", workspace_dirs / "host-state", TOKEN)
    server = build_server("127.0.0.1", 0, chosen)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        # When the app opens a sandbox whose cpu and memory it sends as null
        status, created = _call(f"{url}/sandboxes", "POST", {"item_id": "5", "cpu": None, "memory": None})
        group = Path(settings.WORKSPACE_CGROUP_ROOT) / "workspace-sandboxes" / created["id"]
        limits = [(group / name).read_text().strip() for name in ("cpu.max", "memory.max")]
        health = _call(f"{url}/healthz")[1]
        HttpBackend(url, token=TOKEN).close(created["id"])
    finally:
        server.shutdown()
        server.server_close()
    # Then it reports the sizes as unspecified (nothing to charge), its kernel group holds the cap,
    # and /healthz names the cap
    assert (status, created["cpu_cores"], created["memory_bytes"]) == (201, None, None)
    assert limits == ["100000 100000", str(128 * 1024**2)]
    assert health["cap"] == {"cpu_cores": 1.0, "memory_bytes": 128 * 1024**2, "pids_max": 512}

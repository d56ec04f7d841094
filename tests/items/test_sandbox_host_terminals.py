"""Terminals on a sandbox host (issue 43): the host upgrades a connection and relays the terminal's
keeper over it with its shared token, so the http backend's terminals work as the local backend's
do, from the REST API and WebSocket through to a shell in the host's sandbox."""

from __future__ import annotations

import json
import socket
import urllib.parse

import pytest

from quotas.values import SandboxSize
from tests.fixtures.items import SANDBOX_HOST_TOKEN as TOKEN
from tests.fixtures.terminals import link_output_until, read_until
from workspace.sandboxes.base import SandboxGone
from workspace.sandboxes.http import HttpBackend
from workspace.sandboxes.terminals import Live, TerminalGone, TerminalRefused

ANSWER_WAIT_SECONDS = 20
SECRET = "h" * 32


@pytest.fixture
def host_sandbox(host) -> tuple[HttpBackend, str]:
    """A sandbox open on the host (the `host` fixture closes it), and the app's client of that host."""
    backend = HttpBackend(host, token=TOKEN)
    opened = backend.open(workspace_id="77", spec=SandboxSize(cpu_cores=1.0, memory_bytes=256 * 1024**2))
    return backend, opened.id


def test_a_terminal_on_the_host_is_a_shell_that_outlives_its_connection(host_sandbox):
    # Given a terminal opened through the host in its sandbox, which printed a line
    backend, sandbox_id = host_sandbox
    link = backend.terminal_start(sandbox_id, terminal_id="t1", secret=SECRET, rows=24, cols=80)
    link.send_input(b"echo on-the-''host $(pwd)\n")
    first, _events = link_output_until(link, lambda seen: b"on-the-host /workspace\r\n" in seen)
    link.detach()
    # When the app attaches to it again through the host
    again = backend.terminal_attach(sandbox_id, terminal_id="t1", secret=SECRET)
    replayed, _events = link_output_until(again, lambda seen: b"on-the-host /workspace\r\n" in seen)
    again.close_terminal()
    # Then the shell ran in the sandbox's workspace, and its output is replayed once
    assert b"on-the-host /workspace\r\n" in first
    assert replayed.count(b"on-the-host /workspace\r\n") == 1


def test_attaching_to_a_terminal_the_hosts_sandbox_does_not_keep_is_refused(host_sandbox):
    # Given a sandbox on the host with no terminal "nope"
    backend, sandbox_id = host_sandbox
    # When the app attaches to it / Then the link says there is no such terminal
    link = backend.terminal_attach(sandbox_id, terminal_id="nope", secret=SECRET)
    with pytest.raises(TerminalGone):
        list(link.events(timeout=ANSWER_WAIT_SECONDS))


def test_a_terminal_in_a_sandbox_the_host_does_not_run_is_gone(host):
    # Given a host / When a terminal is asked of a sandbox it does not run / Then it is gone
    with pytest.raises(SandboxGone):
        HttpBackend(host, token=TOKEN).terminal_start("nosuch", terminal_id="t1", secret=SECRET, rows=24, cols=80)


def test_a_terminal_of_an_impossible_size_is_refused_by_the_host(host_sandbox):
    # Given a sandbox on the host / When a terminal of 0 columns is asked / Then it is refused as such
    backend, sandbox_id = host_sandbox
    with pytest.raises(TerminalRefused):
        backend.terminal_start(sandbox_id, terminal_id="t1", secret=SECRET, rows=24, cols=0)


def _terminal_request(host: str, sandbox_id: str, headers: str, body: dict) -> tuple[int, dict]:
    address = urllib.parse.urlsplit(host)
    raw = json.dumps(body).encode()
    request = (
        f"POST /sandboxes/{sandbox_id}/terminals HTTP/1.1\r\nHost: h\r\nContent-Length: {len(raw)}\r\n{headers}\r\n"
    ).encode() + raw
    with socket.create_connection((address.hostname, address.port), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < 2:
            chunk = connection.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _blank, rest = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(rest or b"{}")


GOOD_BODY = {"terminal_id": "t9", "secret": SECRET, "rows": 24, "cols": 80}


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        (f"Authorization: Bearer {TOKEN}\r\n", GOOD_BODY, 400),
        ("Connection: Upgrade\r\nUpgrade: workspace-terminal\r\n", GOOD_BODY, 401),
        (
            f"Authorization: Bearer {TOKEN}\r\nConnection: Upgrade\r\nUpgrade: workspace-terminal\r\n",
            {**GOOD_BODY, "rows": "24; rm -rf /"},
            400,
        ),
        (
            f"Authorization: Bearer {TOKEN}\r\nConnection: Upgrade\r\nUpgrade: workspace-terminal\r\n",
            {**GOOD_BODY, "secret": None},
            400,
        ),
    ],
    ids=["not-upgraded", "no-token", "size-not-a-number", "no-secret"],
)
def test_a_terminal_request_the_host_cannot_take_is_refused_in_json_and_opens_nothing(
    host_sandbox, headers, body, status
):
    # Given a sandbox on the host
    backend, sandbox_id = host_sandbox
    # When a terminal is asked without the upgrade, the token, or with a body it cannot take
    answered, refusal = _terminal_request(backend.base_url, sandbox_id, headers, body)
    # Then it is refused with a JSON error, and no terminal of that id is there
    assert answered == status
    assert refusal["error"]
    with pytest.raises(TerminalGone):
        list(backend.terminal_attach(sandbox_id, terminal_id="t9", secret=SECRET).events(timeout=ANSWER_WAIT_SECONDS))


@pytest.mark.django_db(transaction=True)
def test_a_terminal_over_the_api_on_the_http_backend_answers_over_its_websocket(http_config, socket_to, opened):
    # Given the app on the http backend, and alice's terminal opened over its API
    connection = socket_to(opened)
    read_until(connection, lambda output, controls: any(c["type"] == "live" for c in controls))
    # When she types a command over its WebSocket
    connection.send(b"echo $((6*7))''\n")
    output, _controls = read_until(connection, lambda output, controls: b"42\r\n" in output)
    # Then the shell in the host's sandbox answers
    assert b"42\r\n" in output


def test_the_first_frames_that_come_with_the_hosts_answer_are_kept(host_sandbox):
    # Given a terminal on the host whose keeper speaks at once (its replay marker)
    backend, sandbox_id = host_sandbox
    link = backend.terminal_start(sandbox_id, terminal_id="t2", secret=SECRET, rows=24, cols=80)
    # When the app reads the link's first events
    events = []
    for event in link.events(timeout=ANSWER_WAIT_SECONDS):
        events.append(event)
        if isinstance(event, Live):
            break
    link.close_terminal()
    # Then nothing the keeper said before live output was lost in the upgrade
    assert any(isinstance(event, Live) for event in events)

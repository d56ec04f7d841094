"""kill -9 of the app server in the middle of a terminal session (issue 43), against real gunicorn
processes: the terminal's keeper, shell and command are the sandbox's (in its namespaces and groups,
under its agent, so counted by its open ledger row), not orphans the server leaves behind; a restarted
server attaches to the same terminal and replays what it printed; closing the sandbox then leaves no
process of the terminal anywhere on the machine (as /proc shows it)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from bench.live import Client, Server, close_sandboxes, gunicorn, migrate, production_env, run_django, wait_for
from tests.production.conftest import ACCOUNTS, USER, USER_PASSWORD
from workspace.sandboxes.runner import process_carries_marker

# Long enough for every wait below on a loaded machine; a give-up bound, never a speed the test asserts.
GIVE_UP_SECONDS = 30
# The namespaces a sandbox's boundary makes (docs/ARCHITECTURE.md §5), and the user one it keeps.
NAMESPACES = ("pid", "mnt", "net", "ipc", "uts", "cgroup", "user")
LONG_COMMAND = "sleep 1000"

# What the deployment's database and the sandbox's state say of a terminal: its row, the item's open
# ledger rows, and the sandbox's init (its pid, its agent's) and groups.
SANDBOX_OF_TERMINAL = """
import json, sys
from quotas.models import SandboxActivity
from workspace.items.models import Terminal
from workspace.sandboxes.registry import backend_named
terminal = Terminal.objects.get(terminal_id=sys.argv[1])
state = backend_named(terminal.backend).state(terminal.backend_sandbox_id)
print(json.dumps({
    "activity_id": terminal.activity_id,
    "sandbox_id": terminal.backend_sandbox_id,
    "open_rows": list(SandboxActivity.current.filter(item_id=str(terminal.item_id)).values_list("pk", flat=True)),
    "init": state["init"],
    "groups": state["confinement"]["groups"] if state["confinement"]["kernel"] else [],
}))
"""

OPEN_ROWS = """
import sys
from quotas.models import SandboxActivity
print(SandboxActivity.current.filter(item_id=sys.argv[1]).count())
"""


@pytest.fixture(params=[pytest.param("postgresql", marks=pytest.mark.postgres), "sqlite"], ids=["postgresql", "sqlite"])
def served_database(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The environment of `make serve` (PostgreSQL, the module's throwaway database) or of `make run`'s
    embedded default (a SQLite file of the test's own), with bob's account."""
    if request.param == "postgresql":
        return request.getfixturevalue("deployment")
    env = production_env(
        f"sqlite:///{tmp_path / 'service.sqlite3'}",
        tmp_path / "var",
        WORKSPACE_SERVE_PREPARE="0",
        WORKSPACE_SERVE_WORKER="0",
    )
    migrate(env)
    run_django(ACCOUNTS, env)
    return env


def _signed_in(server: Server) -> tuple[Client, str]:
    """A client of bob's that says his token, and the token (a WebSocket says it too)."""
    client = Client(server.port, timeout=GIVE_UP_SECONDS)
    client.login(USER, USER_PASSWORD)
    made = client.request("POST", "/me/tokens", {"name": "terminal"})
    client.close()
    assert made.status == 201, made.body
    token = made.json()["token"]
    client = Client(server.port, timeout=GIVE_UP_SECONDS)
    client.default_headers["Authorization"] = f"Token {token}"
    return client, token


def _client(server: Server, token: str) -> Client:
    client = Client(server.port, timeout=GIVE_UP_SECONDS)
    client.default_headers["Authorization"] = f"Token {token}"
    return client


def _socket(server: Server, ws_path: str, token: str) -> ClientConnection:
    return connect(
        f"ws://127.0.0.1:{server.port}{ws_path}",
        additional_headers={"Authorization": f"Token {token}"},
        open_timeout=GIVE_UP_SECONDS,
    )


def _read_until(connection: ClientConnection, wanted: Callable[[bytes, list[dict]], bool]) -> tuple[bytes, list[dict]]:
    """The terminal's bytes and control messages up to the first moment `wanted` holds of them."""
    output, controls = b"", []
    deadline = time.monotonic() + GIVE_UP_SECONDS
    while not wanted(output, controls) and time.monotonic() < deadline:
        try:
            message = connection.recv(timeout=max(0.1, deadline - time.monotonic()))
        except (TimeoutError, ConnectionClosed):
            break
        if isinstance(message, bytes):
            output += message
        else:
            controls.append(json.loads(message))
    return output, controls


def _live(_output: bytes, controls: list[dict]) -> bool:
    return any(control["type"] == "live" for control in controls)


def _parent(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _namespaces(pid: int) -> dict[str, str]:
    return {name: os.readlink(f"/proc/{pid}/ns/{name}") for name in NAMESPACES}


def _alive_on_the_machine(sandbox_id: str) -> list[str]:
    """Every live process on the machine started for the sandbox (its marker in the environment, which
    a zombie no longer shows), as pid and command line."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and process_carries_marker(int(entry), sandbox_id):
            found.append(f"{entry} {_command_line(int(entry))}")
    return found


def _left_alive(sandbox_id: str) -> list[str]:
    """What of the sandbox is still alive once a kill has had the time it takes (SIGKILL is
    asynchronous): nothing, or what was left when the test gave up waiting."""
    deadline = time.monotonic() + GIVE_UP_SECONDS
    while (alive := _alive_on_the_machine(sandbox_id)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def _long_command(sandbox_id: str) -> int | None:
    return next(
        (
            int(entry)
            for entry in os.listdir("/proc")
            if entry.isdigit()
            and _command_line(int(entry)) == LONG_COMMAND
            and process_carries_marker(int(entry), sandbox_id)
        ),
        None,
    )


def _has_ended(handle: int) -> bool:
    """A pidfd is readable once its process has ended (whatever took its pid since)."""
    return bool(select.select([handle], [], [], 0)[0])


@contextlib.contextmanager
def _held(pids: dict[str, int]) -> Iterator[dict[str, int]]:
    """A pidfd of each process, closed at the end."""
    handles = {name: os.pidfd_open(pid) for name, pid in pids.items()}
    try:
        yield handles
    finally:
        for handle in handles.values():
            os.close(handle)


def _sandbox_of(env: dict[str, str], terminal_id: str) -> dict:
    return json.loads(run_django(SANDBOX_OF_TERMINAL, env, terminal_id))


def _opened_terminal(client: Client) -> tuple[int, dict]:
    """A notebook of bob's and a terminal in its sandbox: (the item's id, the terminal as opened)."""
    created = client.request("POST", "/a/notebook/items", {"title": "kill -9"})
    assert created.status == 201, created.body
    item_id = created.json()["id"]
    opened = client.request("POST", f"/a/notebook/items/{item_id}/terminals", {"rows": 24, "cols": 80})
    assert opened.status == 201, opened.body
    terminal = opened.json()
    return item_id, {**terminal, "ws_path": "/" + terminal["ws_url"].split("://", 1)[1].split("/", 1)[1]}


def _terminal_processes(sandbox_id: str) -> dict[str, int]:
    """The host pids of the terminal running the long command: the command, its shell (the
    command's parent) and the keeper (the shell's)."""
    command = _long_command(sandbox_id)
    assert command is not None, _alive_on_the_machine(sandbox_id)
    shell = _parent(command)
    assert _command_line(shell).startswith(("/bin/bash -i", "/bin/sh -i")), _command_line(shell)
    return {"keeper": _parent(shell), "shell": shell, "command": command}


def test_a_server_killed_mid_session_leaves_the_terminal_to_its_sandbox_the_next_server_and_its_close(
    served_database, tmp_path
):
    env = served_database
    try:
        with gunicorn(env, tmp_path / "first.log", workers=2) as server:
            # Given bob's terminal in his notebook's sandbox, opened over the real server, running a
            # long command after it printed a line
            client, token = _signed_in(server)
            item_id, terminal = _opened_terminal(client)
            sandbox_id = _sandbox_of(env, terminal["id"])["sandbox_id"]
            with _socket(server, terminal["ws_path"], token) as connection:
                _read_until(connection, _live)
                connection.send(f"echo before-''kill; {LONG_COMMAND}\n".encode())
                printed, _controls = _read_until(connection, lambda output, _c: b"before-kill\r\n" in output)
                assert b"before-kill\r\n" in printed, printed
                wait_for(
                    lambda: _long_command(sandbox_id) is not None, "the long command running", seconds=GIVE_UP_SECONDS
                )
                # When the server, its master and its workers, is killed with -9 mid-session
                os.killpg(server.process.pid, signal.SIGKILL)
                server.process.wait(GIVE_UP_SECONDS)
            client.close()

        # Then the terminal's keeper, shell and command still run, each inside the sandbox: the keeper
        # under its agent, all three in the namespaces of its init and in its groups (on a host with
        # kernel cgroups; a prlimit host has none), which the item's one open ledger row, the
        # terminal's, counts
        sandbox = _sandbox_of(env, terminal["id"])
        init = sandbox["init"]
        processes = _terminal_processes(sandbox_id)
        assert sandbox["open_rows"] == [sandbox["activity_id"]]
        assert _parent(processes["keeper"]) == init["holder"]
        for name, pid in processes.items():
            assert _namespaces(pid) == _namespaces(init["pid"]), name
            assert os.readlink(f"/proc/{pid}/ns/pid") == init["pidns"], name
            assert process_carries_marker(pid, sandbox_id), name
            for group in sandbox["groups"]:
                assert str(pid) in (Path(group) / "cgroup.procs").read_text().split(), (name, group)

        with _held(processes) as handles, gunicorn(env, tmp_path / "second.log", workers=2) as restarted:
            # And a restarted server lists the terminal, attaches to it and replays what it printed
            # before the kill, once, then goes on live on the same terminal (typing echoes)
            client = _client(restarted, token)
            listed = client.get(f"/a/notebook/items/{item_id}/terminals")
            assert [row["id"] for row in listed.json()] == [terminal["id"]], listed.body
            with _socket(restarted, terminal["ws_path"], token) as again:
                replayed, controls = _read_until(again, _live)
                again.send(b"still-here")
                echoed, _more = _read_until(again, lambda output, _c: b"still-here" in output)
            assert controls[0] == {"type": "replay", "start": 0, "end": controls[0]["end"]}
            assert replayed.count(b"before-kill\r\n") == 1
            assert b"still-here" in echoed
            assert not any(_has_ended(handle) for handle in handles.values())

            # When bob closes the sandbox
            closed = client.request("DELETE", f"/a/notebook/items/{item_id}/sandbox")
            assert closed.status in (200, 204), closed.body
            client.close()

            # Then the keeper, the shell and the command have ended, no process of the sandbox is
            # alive anywhere on the machine, and the ledger has no open row for it
            wait_for(
                lambda: all(_has_ended(handle) for handle in handles.values()),
                "the terminal's processes to end",
                seconds=GIVE_UP_SECONDS,
            )
            assert _left_alive(sandbox_id) == []
            assert run_django(OPEN_ROWS, env, str(item_id)).strip() == "0"
    finally:
        close_sandboxes(env)

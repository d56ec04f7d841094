"""The exec agent: the holder of an open sandbox that starts each command inside it.

The first tests run on this machine's real kernel (root, bubblewrap, cgroups), through the exec
endpoint, with the agent and with the `nsenter` path it replaces. The rest put a fake agent on
the other end of the socket: the agent is sandbox code (it may be taken over from inside), so the
server must survive whatever it says.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import threading
from pathlib import Path

import pytest

from quotas.models import SandboxActivity
from tests.fixtures.exec_agent import agent_frame, process_state, run_through, wait_for
from tests.fixtures.items import exec_ok, sandbox_of
from workspace.items import lifecycle
from workspace.sandboxes import local, runner
from workspace.sandboxes.base import SandboxGone, SandboxUnavailable, final_result
from workspace.sandboxes.boundary import configured_boundary
from workspace.sandboxes.exec_agent import AGENT_PROTOCOL, SOCKET_NAME, agent_listen, run_via_agent
from workspace.sandboxes.isolation import PrlimitDriver

WHO_AND_WHERE = "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; pwd; env | sort | cut -d= -f1"


def _state_of(item) -> dict:
    return sandbox_of(item)[1]


@pytest.mark.django_db
@pytest.mark.usefixtures("real_boundary")
@pytest.mark.parametrize("agent", [True, False], ids=["agent", "nsenter"])
def test_a_command_runs_as_the_sandbox_uid_without_privileges_in_the_workspace(
    settings, agent, api_client_for, make_item
):
    # Given a sandbox whose commands the agent starts (or, with it off, enter through nsenter)
    settings.WORKSPACE_SANDBOX_EXEC_AGENT = agent
    api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(api, item, "true")
    # When a command reports who and where it is
    body = exec_ok(api, item, WHO_AND_WHERE)
    # Then it is the item's unprivileged uid, no capabilities, no_new_privs, in /workspace, with
    # only the sandbox's variables
    uid = configured_boundary().uid_for(str(item.pk))
    assert body["stdout"].split("\n") == [
        str(uid),
        "CapEff:\t0000000000000000",
        "NoNewPrivs:\t1",
        "/workspace",
        *sorted(["HOME", "LANG", "PATH", "PWD", "TERM", "TMPDIR", "WORKSPACE_SANDBOX_ID"]),
        "",
    ]
    assert _state_of(item)["init"]["agent"] == (AGENT_PROTOCOL if agent else False)


@pytest.mark.django_db
@pytest.mark.usefixtures("real_boundary")
def test_an_exec_on_a_live_sandbox_starts_no_host_program(monkeypatch, api_client_for, make_item):
    # Given carol's open sandbox
    api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(api, item, "true")

    def no_host_program(*args, **kwargs):
        raise AssertionError("a host program was started for an exec")

    # When she runs a command that writes to both streams and fails
    with monkeypatch.context() as patched:
        patched.setattr(local, "run_streaming", no_host_program)
        patched.setattr(runner.subprocess, "Popen", no_host_program)
        body = exec_ok(api, item, "echo out; echo err >&2; exit 3")
    # Then the agent ran it inside, and its output and exit code came back as before
    assert (body["stdout"], body["stderr"], body["exit_code"]) == ("out\n", "err\n", 3)


@pytest.mark.django_db
@pytest.mark.usefixtures("real_boundary")
def test_sandbox_code_cannot_write_to_the_servers_disk_through_the_holders_output(api_client_for, make_item):
    # Given carol's open sandbox
    api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(api, item, "true")
    init = _state_of(item)["init"]
    # When the host looks at what bubblewrap's init and the agent write to
    targets = [os.readlink(f"/proc/{pid}/fd/{fd}") for pid in (init["pid"], init["holder"]) for fd in (1, 2)]
    # Then the agent writes nowhere and bubblewrap's init only to a pipe (closed once the sandbox was ready)
    assert targets[2:] == ["/dev/null", "/dev/null"]
    assert all(target.startswith("pipe:") for target in targets[:2]), targets


@pytest.mark.django_db
@pytest.mark.usefixtures("real_boundary")
def test_sandbox_code_cannot_trace_the_agent_or_read_its_memory(api_client_for, make_item):
    # Given carol's open sandbox
    api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(api, item, "true")
    # When her command tries to attach to the agent (pid 2) and to read its descriptors and memory
    probe = (
        "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
        "print('attach', libc.ptrace(16, 2, 0, 0), ctypes.get_errno()); "
        "print('fds', os.access('/proc/2/fd', os.R_OK), 'mem', os.access('/proc/2/mem', os.R_OK))"
    )
    body = exec_ok(api, item, ["python3", "-c", probe])
    # Then every one is refused (the agent is not dumpable), while her own commands stay traceable
    assert body["stdout"].split("\n")[:2] == ["attach -1 1", "fds False mem False"], body
    own = exec_ok(api, item, "python3 -c \"import os; print(os.access(f'/proc/{os.getppid()}/mem', os.R_OK))\"")
    assert own["stdout"] == "True\n"


@pytest.mark.django_db
@pytest.mark.usefixtures("real_boundary")
def test_a_sandbox_opened_without_the_agent_keeps_working_once_it_is_turned_on(settings, api_client_for, make_item):
    # Given a sandbox opened while the agent was off (a server before the upgrade)
    settings.WORKSPACE_SANDBOX_EXEC_AGENT = False
    api, item = api_client_for("carol"), make_item(created_by="carol")
    first = exec_ok(api, item, "echo one")
    # When the agent is turned on and she runs another command
    settings.WORKSPACE_SANDBOX_EXEC_AGENT = True
    second = exec_ok(api, item, "echo two")
    # Then it runs in the same sandbox, entered as before
    assert (second["stdout"], second["sandbox_id"]) == ("two\n", first["sandbox_id"])
    assert _state_of(item)["init"]["agent"] is False


@pytest.mark.django_db
@pytest.mark.usefixtures("real_boundary")
@pytest.mark.parametrize("room", [0, 1], ids=["agent-cannot-fork", "session-cannot-fork"])
def test_a_sandbox_at_its_process_limit_says_the_command_could_not_start(room, api_client_for, make_item):
    # Given an open sandbox whose process limit leaves `room` processes beyond its holders (set
    # from the host once it is open: bubblewrap's two and the agent)
    api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(api, item, "true")
    (pids,) = [Path(group) for group in _state_of(item)["confinement"]["groups"] if (Path(group) / "pids.max").exists()]
    (pids / "pids.max").write_text(str(3 + room))
    # When she runs a command
    body = exec_ok(api, item, "echo never")
    # Then it fails with the reason, and the sandbox still counts as live
    assert (body["exit_code"], body["stdout"]) == (126, ""), body
    assert "cannot start the command" in body["stderr"]
    assert body["sandbox_closed"] is False


def test_without_perl_the_boundary_does_not_use_the_agent(settings, monkeypatch):
    # Given a machine without /usr/bin/perl
    monkeypatch.setattr("workspace.sandboxes.boundary.agent_available", lambda: False)
    settings.WORKSPACE_SANDBOX_EXEC_AGENT = True
    # When the boundary is configured
    boundary = configured_boundary()
    # Then execs enter the namespaces the old way
    assert boundary.exec_agent is False
    assert boundary.uses_agent is False


def test_a_bubblewrap_that_cannot_set_the_sandbox_up_refuses_the_open_with_its_reason(settings, tmp_path, monkeypatch):
    # Given a bubblewrap that fails the way a kernel without user namespaces makes it fail, as root
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    settings.WORKSPACE_BWRAP = str(fake)
    boundary = configured_boundary()
    monkeypatch.setattr(boundary.__class__, "keeps_namespaces", property(lambda self: True))
    backend = local.LocalBackend(
        state_dir=tmp_path / "state", workspace_root=tmp_path / "ws", driver=PrlimitDriver(), boundary=boundary
    )
    # When a sandbox opens
    with pytest.raises(SandboxUnavailable) as refused:
        backend.open(workspace_id="7", spec=local.SandboxSize(), workspace=_traversable(tmp_path))
    # Then the refusal carries bubblewrap's own words and nothing of the sandbox is left
    assert "No permissions to creating new namespace" in str(refused.value)
    assert backend.sandboxes() == []


def _traversable(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    for directory in (workspace, *workspace.parents):
        if directory == Path("/"):
            break
        directory.chmod(directory.stat().st_mode | 0o011)
    return workspace


# A fake agent on the socket (tests/fixtures/exec_agent.py): what a taken-over agent could say.


def test_an_agent_that_never_answers_is_given_up_at_the_time_limit(fake_agent):
    # Given an agent that takes the command and then says nothing, its connection held open
    release, hung_up = threading.Event(), threading.Event()

    def hold(connection: socket.socket) -> None:
        release.wait(10)
        hung_up.set()

    home = fake_agent(hold)
    # When a command with a 0.3 s limit is run through it
    result = run_through(home, timeout=0.3)
    still_held = not hung_up.is_set()
    release.set()
    # Then the server gave up by itself, the agent still holding the connection, and reports a
    # killed, timed-out command
    assert still_held
    assert (result.exit_code, result.timed_out) == (137, True)


def test_an_agent_naming_a_process_outside_its_sandbox_gets_nothing_killed_nor_started(fake_agent):
    # Given a process of the host, and an agent that names its pid as the command's and then stalls
    bystander = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        heard: list[bytes] = []
        listened = threading.Event()

        def lie(connection: socket.socket) -> None:
            connection.sendall(agent_frame(b"P", str(bystander.pid).encode()))
            connection.settimeout(5)
            heard.append(connection.recv(1))
            listened.set()

        home = fake_agent(lie)
        # When a command runs through it
        result = run_through(home, timeout=5, holder_pid=1)
        listened.wait(5)
        # Then the server gives no go-ahead (no child of the sandbox's holder has that pid) and ends
        # the command as killed at once, and the bystander still runs
        assert result.exit_code == 137
        assert result.timed_out is False
        assert heard == [b""]
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_an_agent_sending_an_oversized_frame_ends_the_command_without_an_error(fake_agent):
    # Given an agent that announces a frame of 1 GiB
    home = fake_agent(lambda connection: connection.sendall(b"O" + struct.pack(">I", 1 << 30) + b"x" * 100))
    # When a command runs through it
    result = run_through(home)
    # Then the command ends as killed, with none of the frame kept
    assert (result.exit_code, result.stdout) == (137, "")


def test_an_agent_flooding_output_is_held_to_the_output_limit(fake_agent):
    # Given an agent that sends 200 KiB of stdout, then a clean exit
    def flood(connection: socket.socket) -> None:
        for _ in range(50):
            connection.sendall(agent_frame(b"O", b"y" * 4096))
        connection.sendall(agent_frame(b"X", b"0"))

    home = fake_agent(flood)
    # When a command with a 1 KiB output limit runs through it
    result = run_through(home, output_limit=1024)
    # Then 1 KiB is kept, the rest marked as cut, and the exit code is the agent's
    assert (len(result.stdout), result.stdout_truncated, result.exit_code) == (1024, True, 0)


def test_an_exec_through_an_agent_that_is_gone_is_a_gone_sandbox(tmp_path):
    # Given a sandbox directory whose agent socket nobody listens on any more
    home = tmp_path / "home"
    home.mkdir()
    agent_listen(home).close()
    assert (home / SOCKET_NAME).exists()
    # When a command is run through it
    # Then the sandbox counts as gone (the caller closes it and opens a new one)
    with pytest.raises(SandboxGone):
        run_through(home)


@pytest.mark.django_db
@pytest.mark.usefixtures("real_boundary")
def test_a_probe_closes_a_sandbox_whose_agent_was_stopped(api_client_for, make_item):
    # Given carol's sandbox whose agent was stopped (`kill -STOP 2` from inside, or a tracer)
    api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(api, item, "true")
    holder = _state_of(item)["init"]["holder"]
    os.kill(holder, signal.SIGSTOP)
    wait_for(lambda: process_state(holder) == "T")
    # When the worker probes the sandboxes
    closed = lifecycle.sandboxes_probe().closed
    # Then it is closed (it would start no command again) and no longer counted
    assert closed == 1
    assert not SandboxActivity.current.filter(item_id=str(item.pk)).exists()


def test_an_agent_that_answers_before_reading_the_whole_command_is_heard(tmp_path):
    # Given an agent that cannot fork: it answers "cannot start" and hangs up without reading
    home = tmp_path / "home"
    home.mkdir()
    listener = agent_listen(home)

    def refuse() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.sendall(agent_frame(b"E", b"cannot start the command: no room\n") + agent_frame(b"X", b"32256"))

    thread = threading.Thread(target=refuse, daemon=True)
    thread.start()
    # When a command too long to fit in the socket's buffer is sent to it
    events = run_via_agent(
        home, holder_pid=os.getpid(), argv=["echo", "x" * 2_000_000], env={"PATH": "/usr/bin"}, timeout=5
    )
    result = final_result(events)
    thread.join(timeout=5)
    listener.close()
    # Then its answer is the result (exit 126 and why), not a sandbox counted as gone
    assert (result.exit_code, result.stderr) == (126, "cannot start the command: no room\n")


def test_an_agent_of_the_first_protocol_is_not_sent_the_go_ahead(fake_agent, children):
    # Given an agent of a sandbox opened before the go-ahead (it starts the command at once and
    # takes anything the server sends as the server leaving)
    def first_protocol(connection: socket.socket) -> None:
        connection.sendall(agent_frame(b"P", str(children[0].pid).encode()))
        connection.settimeout(0.3)
        try:
            if connection.recv(1):
                return
        except TimeoutError:
            pass
        connection.sendall(agent_frame(b"O", b"ran\n") + agent_frame(b"X", b"0"))

    home = fake_agent(first_protocol)
    # When a command runs through it as through such an agent
    result = run_through(home, go_ahead=False)
    # Then it ran and said so
    assert (result.exit_code, result.stdout) == (0, "ran\n")


def test_the_agent_starts_a_command_only_after_the_go_ahead(fake_agent, children):
    # Given an agent that waits for the server's go-ahead before it starts the command
    heard: list[bytes] = []

    def second_protocol(connection: socket.socket) -> None:
        connection.sendall(agent_frame(b"P", str(children[0].pid).encode()))
        connection.settimeout(5)
        heard.append(connection.recv(1))
        connection.sendall(agent_frame(b"O", b"ran\n") + agent_frame(b"X", b"0"))

    home = fake_agent(second_protocol)
    # When a command runs through it
    result = run_through(home)
    # Then the server held the session (a child of the holder) and then said "G"
    assert heard == [b"G"]
    assert (result.exit_code, result.stdout) == (0, "ran\n")

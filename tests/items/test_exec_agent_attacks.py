"""Attacks on the exec agent: sandbox code that takes over the agent or its sessions (ptrace and
pidfd_getfd work inside, same uid), and what the server must not do then.

The real-kernel tests run on this machine (root, bubblewrap, cgroups); the others put a fake
agent on the socket, as in test_exec_agent.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from tests.fixtures.exec_agent import agent_frame, process_state, run_through, wait_for
from tests.fixtures.items import exec_ok, sandbox_of
from workspace.sandboxes.base import ExecResult, SandboxGone, final_result
from workspace.sandboxes.exec_agent import agent_listen
from workspace.sandboxes.registry import backend_named
from workspace.sandboxes.runner import kill_group_through

# Run as the command of an exec: takes a copy of its session's connection to the server (the
# session is its parent; pidfd_getfd needs only ptrace rights, which the same uid has), leaves a
# setsid'd child holding it, kills the session and exits. The session's process group is then
# empty, so its host pid is free for any host process, while the server still waits on the
# connection until the command's time limit.
ORPHAN_THE_GROUP = r"""exec python3 - <<'EOF'
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
session = os.getppid()
handle = os.pidfd_open(session)
stolen = []
for fd in os.listdir(f"/proc/{session}/fd"):
    if os.readlink(f"/proc/{session}/fd/{fd}").startswith("socket:"):
        stolen.append(libc.syscall(438, handle, int(fd), 0))
assert stolen and min(stolen) >= 0, stolen
if os.fork() == 0:
    os.setsid()
    devnull = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    time.sleep(60)
    os._exit(0)
os.kill(session, 9)
EOF
"""


def _dead(pid: int) -> bool:
    return process_state(pid) in ("", "Z", "X")


def _host_process_at(pid: int, *, tries: int = 50) -> subprocess.Popen:
    """A host process group leader (a `sleep`) with exactly host pid `pid`, as pid reuse gives
    one on a busy machine (pid_max is 32768 here): root sets the kernel's last pid just before."""
    for _ in range(tries):
        Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
        process = subprocess.Popen(["sleep", "30"], start_new_session=True)
        if process.pid == pid:
            return process
        process.kill()
        process.wait()
    pytest.skip(f"could not start a process at pid {pid} (other processes took it first)")


@pytest.mark.django_db
@pytest.mark.usefixtures("real_boundary", "dumpable_agent")
def test_sandbox_code_that_frees_its_sessions_pid_cannot_make_the_time_limit_kill_a_host_process(
    api_client_for, make_item
):
    # Given carol's open sandbox
    api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(api, item, "true")
    sandbox_id, _state = sandbox_of(item)
    backend = backend_named("local")
    pids = backend.home(sandbox_id) / "pids"
    results: list[ExecResult] = []

    def run() -> None:
        results.append(backend.exec(sandbox_id, command=ORPHAN_THE_GROUP, timeout=4.0, exec_id="attack"))

    # When her command kills its session but keeps its connection open, so the session's host pid
    # is free while the server waits for the time limit, and a host process gets that pid
    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    leader = int(wait_for(lambda: next((entry.name for entry in pids.iterdir()), None)))
    wait_for(lambda: _dead(leader))
    bystander = _host_process_at(leader)
    try:
        runner.join(timeout=15)
        # Then the command ends at its limit, and the host process still runs
        (result,) = results
        assert result.timed_out is True, result.stderr
        assert bystander.poll() is None, "the server killed a host process group"
    finally:
        bystander.kill()
        bystander.wait()
        backend.close(sandbox_id)


@pytest.mark.django_db
@pytest.mark.usefixtures("real_boundary", "dumpable_agent")
def test_a_command_that_kills_its_session_but_stays_in_its_group_is_still_killed_at_its_limit(
    api_client_for, make_item
):
    # Given carol's open sandbox
    api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(api, item, "true")
    sandbox_id, _state = sandbox_of(item)
    backend = backend_named("local")
    # When her command keeps its session's connection, kills the session and runs on in its
    # process group (whose leader is gone) past its limit, leaving a file if it ever wakes
    stay = ORPHAN_THE_GROUP.replace("    os.setsid()\n", "").replace(
        "os.kill(session, 9)\n", "os.kill(session, 9)\ntime.sleep(60)\nopen('outlived', 'w').close()\n"
    )
    result = backend.exec(sandbox_id, command=stay, timeout=2.0, exec_id="stay")
    # Then the time limit still kills the group: nothing of it runs on, nor ran to its end
    assert result.timed_out is True
    left = exec_ok(api, item, "ps -eo args | grep -c '^python3' || true; ls outlived 2>/dev/null || echo none")
    assert left["stdout"] == "0\nnone\n"
    backend.close(sandbox_id)


@pytest.mark.django_db
@pytest.mark.usefixtures("real_boundary")
def test_a_stopped_agent_closes_the_sandbox_and_the_command_runs_in_a_new_one(monkeypatch, api_client_for, make_item):
    # Given carol's open sandbox whose agent her code stopped (it accepts nothing any more)
    monkeypatch.setattr("workspace.sandboxes.exec_agent.ANSWER_SECONDS", 0.5)
    api, item = api_client_for("carol"), make_item(created_by="carol")
    first = exec_ok(api, item, "kill -STOP 2")
    # When she runs a command with a long time limit
    body = exec_ok(api, item, "echo fresh", timeout=30)
    # Then the broken sandbox was closed as soon as the stopping command ended (its reply says so),
    # and the next command does not run to its limit (not timed out): it runs in a new one
    assert (first["sandbox_closed"], "stopped working" in first["stderr"]) == (True, True)
    assert (body["exit_code"], body["stdout"], body["timed_out"]) == (0, "fresh\n", False)
    assert body["sandbox_id"] != first["sandbox_id"]
    assert first["sandbox_id"] not in backend_named("local").sandboxes()


# A fake agent on the socket, as in test_exec_agent.py.


@pytest.fixture
def dumpable_agent(monkeypatch) -> None:
    """The agent as on a machine whose prctl number the server does not know: it stays dumpable,
    so sandbox code can trace it and its sessions. The attacks below need that; the server's own
    defences must hold without the agent's."""
    monkeypatch.setattr("workspace.sandboxes.exec_agent._SYSCALLS", {})


def test_an_agent_naming_many_processes_gets_only_its_first_recorded(fake_agent, children):
    # Given an agent that names each of three processes as the command's, then says it exited
    def many(connection: socket.socket) -> None:
        first, *others = (agent_frame(b"P", str(child.pid).encode()) for child in children)
        connection.sendall(first)
        connection.settimeout(5)
        connection.recv(1)  # the go-ahead
        connection.sendall(b"".join(others) + agent_frame(b"X", b"0"))

    home = fake_agent(many)
    recorded: list[int] = []
    # When a command runs through it
    result = run_through(home, on_start=recorded.append)
    # Then only the first is recorded (each record is a file in the state directory, and each
    # name a scan of /proc), and the others end the command as killed
    assert recorded == [children[0].pid]
    assert result.exit_code == 137
    assert children[0].wait(timeout=5) == -9
    assert [child.poll() for child in children[1:]] == [None, None]


@pytest.mark.parametrize("status", [b"99999999999", b"4294967295", b"65536", b"-1", b""])
def test_an_agent_reporting_an_impossible_exit_status_ends_the_command_as_killed(fake_agent, status):
    # Given an agent that reports a wait status no process can have
    home = fake_agent(lambda connection: connection.sendall(agent_frame(b"X", status)))
    # When a command runs through it
    result = run_through(home)
    # Then the command ends as killed, not with an error (a 500) nor as a success
    assert result.exit_code == 137


def test_an_agent_that_is_stopped_is_a_gone_sandbox(monkeypatch, fake_agent):
    # Given an agent that takes the command and says nothing, its holder stopped from inside
    monkeypatch.setattr("workspace.sandboxes.exec_agent.ANSWER_SECONDS", 0.2)
    holder = subprocess.Popen(["sleep", "30"])
    os.kill(holder.pid, signal.SIGSTOP)
    release = threading.Event()
    home = fake_agent(lambda connection: release.wait(10))
    try:
        # When a command with a long time limit runs through it
        # Then the server gives up on the sandbox because its agent is stopped, not because the
        # limit passed nor because the agent hung up (the caller closes it and runs the command
        # in a new one)
        with pytest.raises(SandboxGone, match="its exec agent is stopped"):
            run_through(home, timeout=30, holder_pid=holder.pid)
    finally:
        release.set()
        holder.kill()
        holder.wait()


def test_an_agent_that_is_only_slow_is_waited_for_until_the_time_limit(monkeypatch, fake_agent):
    # Given an agent, running (a sandbox at its cpu limit), that says nothing for a while
    monkeypatch.setattr("workspace.sandboxes.exec_agent.ANSWER_SECONDS", 0.1)
    release = threading.Event()
    home = fake_agent(lambda connection: release.wait(10))
    # When a command runs through it
    result = run_through(home, timeout=0.6)
    release.set()
    # Then its sandbox is not given up: the command ends at its limit, as with the old path
    assert (result.exit_code, result.timed_out) == (137, True)


def test_an_agent_whose_named_process_is_gone_cannot_make_the_time_limit_kill_the_pids_next_owner(
    stalling_agent,
):
    # Given an agent that names a real child of the holder, which ends (its group with it) at
    # once, and whose pid a host process group leader gets next
    named = subprocess.Popen(["sleep", "30"], start_new_session=True)
    home = stalling_agent(named.pid)
    bystanders: list[subprocess.Popen] = []

    def swap(pid: int) -> None:
        named.kill()
        named.wait()
        bystanders.append(_host_process_at(pid))

    # When the command runs past its limit (the server kills the named process's group)
    try:
        result = run_through(home, timeout=0.5, on_start=swap)
        # Then the process that has the pid since still runs
        (bystander,) = bystanders
        assert result.timed_out is True
        assert bystander.poll() is None
    finally:
        for process in bystanders:
            process.kill()
            process.wait()


def test_a_stop_reaches_the_command_through_its_session(stalling_agent, children):
    # Given an agent that names a process of the sandbox as the command's, then stalls
    home = stalling_agent(children[0].pid)
    asked: list[bool] = []

    def stopped() -> bool:
        asked.append(len(asked) >= 3)
        return asked[-1]

    # When someone stops it (the fourth time the server asks) while its limit is far off
    result = run_through(home, timeout=30, stopped=stopped)
    # Then the first yes is acted on, never asked again: its process group is killed and the
    # exec ends, not timed out
    assert asked == [False, False, False, True]
    assert children[0].wait(timeout=5) == -9
    assert (result.exit_code, result.timed_out) == (137, False)


# Run as the command of an exec: rewrites the sandbox's marker in its session's environment
# (/proc/<pid>/mem, same uid), which the stop by pid checks before it kills, then runs on.
UNMARK_THE_SESSION = r"""exec python3 - <<'EOF'
import os, time
session = os.getppid()
fields = open(f"/proc/{session}/stat").read().rpartition(")")[2].split()
start, end = int(fields[-3]), int(fields[-2])
with open(f"/proc/{session}/mem", "r+b", buffering=0) as mem:
    mem.seek(start)
    at = mem.read(end - start).find(b"WORKSPACE_SANDBOX_ID=")
    assert at >= 0
    mem.seek(start + at)
    mem.write(b"X")
print("unmarked", flush=True)
time.sleep(30)
EOF
"""


@pytest.mark.django_db
@pytest.mark.usefixtures("real_boundary", "dumpable_agent")
def test_a_command_that_rewrites_its_sessions_environment_is_still_stopped(api_client_for, make_item):
    # Given carol's command that rewrote its session's environment and runs on
    api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(api, item, "true")
    sandbox_id, _state = sandbox_of(item)
    backend = backend_named("local")
    pids = backend.home(sandbox_id) / "pids"
    events = backend.exec_streaming(sandbox_id, command=UNMARK_THE_SESSION, timeout=10.0, exec_id="unmarked")
    try:
        assert next(events) == ("stdout", b"unmarked\n")
        assert list(pids.iterdir())
        # When she stops it
        assert backend.stop(sandbox_id, "unmarked") is True
        result = final_result(events)
        # Then the stop ends it, not its time limit
        assert (result.exit_code, result.timed_out) == (137, False)
    finally:
        events.close()
        backend.close(sandbox_id)


@pytest.mark.django_db
@pytest.mark.usefixtures("real_boundary")
def test_a_command_that_kills_its_session_does_not_run_on_past_its_exec(api_client_for, make_item):
    # Given carol's open sandbox
    api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(api, item, "true")
    # When her command kills the session that relays it (its parent) and runs on in its group
    body = exec_ok(api, item, "kill -9 $PPID; exec sleep 60", timeout=30)
    # Then the exec ends as killed, and so does the command: nothing of it runs on unlimited
    assert body["exit_code"] == 137
    left = exec_ok(api, item, "ps -eo args | grep -c '^sleep 60' || true")
    assert left["stdout"] == "0\n"


def test_only_the_servers_user_may_connect_to_an_agent_whatever_its_umask(tmp_path):
    # Given a server running with a permissive umask (a service manager's UMask=0000)
    home = tmp_path / "home"
    home.mkdir()
    previous = os.umask(0)
    try:
        # When it makes a sandbox's agent socket
        listener = agent_listen(home)
    finally:
        os.umask(previous)
    listener.close()
    # Then no other local user may connect to it (connecting needs write permission on it), so
    # none can run commands in a sandbox whose id they learnt
    assert (home / "agent.sock").stat().st_mode & 0o777 == 0o600


def test_a_command_whose_group_never_empties_holds_the_server_one_kill_wait_past_its_limit(
    monkeypatch, stalling_agent, children
):
    # Given an agent that names a process of the sandbox as the command's and then stalls, the
    # process's group never empty once killed (sandbox code keeps a zombie in it: a process of
    # another group moves a child of its own into the command's group and never reaps it; here
    # the named process itself, which the holder does not reap)
    home = stalling_agent(children[0].pid)
    kills: list[bool] = []

    def counted(pidfd: int, pid: int, *, settle: bool = True) -> None:
        kills.append(settle)
        kill_group_through(pidfd, pid, settle=settle)

    monkeypatch.setattr("workspace.sandboxes.exec_agent.kill_group_through", counted)
    # When the command runs past its limit
    result = run_through(home, timeout=0.3)
    # Then the exec ends timed out, its group killed more than once (the limit, then its pipes'
    # end) but waited for once (KILL_SETTLE_SECONDS), not once per kill
    assert (result.exit_code, result.timed_out) == (137, True)
    assert children[0].wait(timeout=5) == -9
    assert len(kills) > 1
    assert kills.count(True) == 1

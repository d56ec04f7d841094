"""The sandbox pool harness itself (tests/fixtures/sandbox_pool.py): real `runsandboxhost` processes."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.fixtures.items import host_call, isolation_or_skip
from tests.fixtures.quotas import GIB
from tests.fixtures.sandbox_pool import (
    await_no_leftovers,
    await_sandbox_command,
    leftovers,
    pool_tokens,
    release_host,
)

CPU, MEMORY, COUNT = "SANDBOX_HOST_CAPACITY_CPU", "SANDBOX_HOST_CAPACITY_MEMORY", "SANDBOX_HOST_CAPACITY_SANDBOXES"
SMALL = {CPU: "2", MEMORY: "2G", COUNT: "1"}
MEDIUM = {CPU: "4", MEMORY: "4G", COUNT: "3"}
LARGE = {CPU: "8.5", MEMORY: "16G"}


def test_three_hosts_start_each_reporting_its_own_capacity(sandbox_pool):
    # Given three hosts started together with different capacities
    hosts = sandbox_pool([SMALL, MEDIUM, LARGE])
    # When each is asked its health
    answers = [host.call("GET", "/healthz") for host in hosts]
    # Then each answers 200 with the capacity it was given, on a port and a token of its own
    assert [status for status, _ in answers] == [200, 200, 200]
    assert [body["capacity"] for _, body in answers] == [
        {"cpu_cores": 2.0, "memory_bytes": 2 * GIB, "sandboxes": 1},
        {"cpu_cores": 4.0, "memory_bytes": 4 * GIB, "sandboxes": 3},
        {"cpu_cores": 8.5, "memory_bytes": 16 * GIB, "sandboxes": None},
    ]
    assert len({host.port for host in hosts}) == len(set(pool_tokens(hosts).values())) == 3
    assert pool_tokens(hosts) == {host.url: host.token for host in hosts}


def test_each_host_refuses_the_tokens_of_the_others(sandbox_pool):
    # Given three hosts, each with its own token
    hosts = sandbox_pool([SMALL, MEDIUM, LARGE])
    # When each is called with every other host's token, and with its own
    foreign = {
        (asked.port, sent.port): host_call(f"{asked.url}/healthz", token=sent.token)[0]
        for asked in hosts
        for sent in hosts
        if asked is not sent
    }
    own = [host.call("GET", "/healthz")[0] for host in hosts]
    # Then every foreign token is refused with 401 and every host takes its own
    assert set(foreign.values()) == {401}
    assert len(foreign) == 6
    assert own == [200, 200, 200]


def test_a_host_killed_while_a_command_runs_leaves_nothing_once_released(sandbox_pool):
    isolation_or_skip()
    # Given two hosts, the first with a sandbox on a 1 MiB workspace image running `sleep 300`
    doomed, bystander = sandbox_pool([MEDIUM, SMALL])
    status, opened = doomed.call("POST", "/sandboxes", {"item_id": "pool-1", "disk": 1024 * 1024})
    assert status == 201, (opened, doomed.stderr_tail())
    sandbox_id = opened["id"]
    answers: list[object] = []
    running = threading.Thread(target=_exec_sleep, args=(doomed, sandbox_id, answers), daemon=True)
    running.start()
    sleeper = await_sandbox_command(doomed, sandbox_id, b"sleep\x00300\x00")
    # When that host is killed with SIGKILL
    doomed.kill()
    running.join(timeout=10)
    # Then its sandbox runs on (nobody closed it) until the harness releases the host
    assert not doomed.alive()
    assert _alive(sleeper)
    assert leftovers([doomed], [sandbox_id])
    closed, unmounted = release_host(doomed)
    assert (closed, unmounted) == (1, 1)
    # And then no process or mount of its directories is left, and the other host still serves
    assert await_no_leftovers([doomed], [sandbox_id]) == []
    assert not _alive(sleeper)
    assert bystander.call("GET", "/healthz")[0] == 200
    assert len(answers) == 1
    assert isinstance(answers[0], OSError)  # the exec never got an answer: its host died under it


def _exec_sleep(host, sandbox_id: str, answers: list[object]) -> None:
    try:
        answers.append(host.call("POST", f"/sandboxes/{sandbox_id}/exec", {"command": ["sleep", "300"]}, timeout=30))
    except OSError as exc:  # the host died under the call
        answers.append(exc)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")

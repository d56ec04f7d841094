"""Exec as server-sent events (`Accept: text/event-stream`): output while it runs, then the result."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest

from tests.fixtures.exec_agent import wait_for
from tests.fixtures.items import exec_ok, item_url, sandbox_of
from workspace.sandboxes.isolation import Confinement

pytestmark = pytest.mark.django_db
SSE = "text/event-stream"


def _stream(api, item, command, **extra):
    return api.post(item_url(item, "/exec"), {"command": command, **extra}, format="json", HTTP_ACCEPT=SSE)


def _events(response) -> list[tuple[str, dict]]:
    text = b"".join(response.streaming_content).decode()
    events = []
    for block in filter(None, text.split("\n\n")):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def test_output_streams_as_it_is_written_then_the_result(alice_api, make_item):
    # Given a command that writes twice with a pause between
    response = _stream(alice_api, make_item(), "echo one; sleep 0.2; echo two >&2; exit 3")
    # When its answer is read as events
    events = _events(response)
    # Then each write is its own event, in order, and the last is the exec result
    assert response["Content-Type"] == SSE
    assert events[1:-1] == [
        ("output", {"stream": "stdout", "text": "one\n"}),
        ("output", {"stream": "stderr", "text": "two\n"}),
    ]
    kind, result = events[-1]
    assert (kind, result["exit_code"], result["sandbox_opened"]) == ("result", 3, True)


def test_the_first_event_names_the_sandbox_it_opened_and_the_timeout(alice_api, make_item):
    # Given alice's notebook with no live sandbox
    item = make_item()
    # When she streams a command that prints nothing, with a timeout of 5 s
    events = _events(_stream(alice_api, item, "true", timeout=5))
    # Then the first event says which sandbox it opened and when the command will be stopped
    kind, started = events[0]
    assert (kind, started["sandbox_opened"], started["timeout_seconds"]) == ("started", True, 5.0)
    assert started["sandbox_id"] == events[-1][1]["sandbox_id"]


def test_a_second_stream_says_it_reused_the_live_sandbox(alice_api, make_item):
    # Given alice's notebook whose sandbox a first command opened
    item = make_item()
    _events(_stream(alice_api, item, "true"))
    # When she streams another command
    kind, started = _events(_stream(alice_api, item, "true"))[0]
    # Then its first event says the sandbox was already open
    assert (kind, started["sandbox_opened"]) == ("started", False)


def test_a_streamed_command_past_its_timeout_ends_with_a_timed_out_result(alice_api, make_item):
    # Given alice's notebook
    # When she streams a command that prints, then sleeps past its half-second timeout
    events = _events(_stream(alice_api, make_item(), "echo started; sleep 30", timeout=0.5))
    # Then what it printed streams first and the last event is a result that says it timed out
    assert events[1] == ("output", {"stream": "stdout", "text": "started\n"})
    assert events[-1][0] == "result"
    assert events[-1][1]["timed_out"] is True


def test_a_quota_refusal_comes_back_as_json_before_any_event(write_config, alice_api, make_item):
    # Given alice may run one sandbox and has one live
    write_config("[resources.per_user]\ncount = 1\n")
    busy, other = make_item(), make_item()
    assert _stream(alice_api, busy, "true").status_code == 200
    # When she streams a command in another item
    response = _stream(alice_api, other, "true")
    # Then the 507 answers as usual, nothing ran
    assert response.status_code == 507
    assert json.loads(response.content)["error"] == "sandbox_quota_exceeded"


def test_an_empty_streamed_command_is_a_400(alice_api, make_item):
    # Given alice's notebook
    item = make_item()
    # When she streams an empty command / Then it is 400
    assert _stream(alice_api, item, "").status_code == 400


def test_a_stranger_streaming_a_command_gets_404(bob_api, make_item):
    # Given alice's notebook
    item = make_item()
    # When bob streams a command in it / Then it is 404
    assert _stream(bob_api, item, "true").status_code == 404


def _sandbox_processes(item) -> set[int]:
    """The pids in the item's sandbox's cgroups, as the kernel lists them: its init and holder at
    rest, and while a command runs, the command with what started it (an agent's session, or
    the nsenter chain), which leave only once the command's exit was handed to the server."""
    return set(Confinement.from_dict(sandbox_of(item)[1]["confinement"]).member_pids())


def _running(cmdline: bytes) -> bool:
    """Whether a process on this machine has exactly this command line (as /proc shows it)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "cmdline").read_bytes() == cmdline:
                    return True
    return False


@pytest.mark.usefixtures("real_boundary")
@pytest.mark.parametrize("agent", [True, False], ids=["through the exec agent", "through nsenter"])
def test_a_streamed_command_whose_client_stopped_reading_is_killed_at_its_time_limit(
    settings, alice_api, make_item, agent
):
    # Given alice streaming a command that prints, then sleeps far past its limit (a few seconds:
    # on a loaded machine the sleep must be seen running before the limit kills it)
    settings.WORKSPACE_SANDBOX_EXEC_AGENT = agent
    events = iter(_stream(alice_api, make_item(), "echo started; exec sleep 86399.25", timeout=4).streaming_content)
    assert b"event: started" in next(events)
    assert b"started\\n" in next(events)
    # (the shell that printed it becomes the sleep a moment later)
    running_by = time.monotonic() + 15
    while not _running(b"sleep\x0086399.25\x00") and time.monotonic() < running_by:
        time.sleep(0.01)
    assert _running(b"sleep\x0086399.25\x00")
    # When her client reads nothing more (the server would wait in its write: nothing resumes
    # the loop that relays the command's output)
    gone_by = time.monotonic() + 20
    while _running(b"sleep\x0086399.25\x00") and time.monotonic() < gone_by:
        time.sleep(0.05)
    # Then the command is killed at its time limit all the same, and the stream, read on, says so
    assert not _running(b"sleep\x0086399.25\x00")
    rest = b"".join(events).decode()
    assert '"timed_out":true' in rest.replace(" ", "")


class _LaterClock:
    """time.monotonic, moved on by hand: a relay resumed 'later' than the command's deadline."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@pytest.mark.usefixtures("real_boundary")
@pytest.mark.parametrize(
    ("agent", "relay_module"),
    [(True, "workspace.sandboxes.exec_agent"), (False, "workspace.sandboxes.runner")],
    ids=["through the exec agent", "through nsenter"],
)
def test_a_command_that_ended_in_time_read_after_its_deadline_is_not_reported_timed_out(
    settings, monkeypatch, alice_api, make_item, agent, relay_module
):
    # Given alice streaming a command that prints and ends at once, with a 30 s limit
    settings.WORKSPACE_SANDBOX_EXEC_AGENT = agent
    clock = _LaterClock()
    monkeypatch.setattr(f"{relay_module}.time", clock)
    item = make_item()
    exec_ok(alice_api, item, "true")
    at_rest = _sandbox_processes(item)
    events = iter(_stream(alice_api, item, "echo started; exit 3", timeout=30).streaming_content)
    assert b"event: started" in next(events)
    assert b"started\\n" in next(events)
    # When her client reads the rest only after the deadline: the command has ended and every
    # process it took is gone (its exit is sent, unread), and the relay resumes a minute later
    # (a subset: the session of the `true` before may still have been leaving at rest)
    wait_for(lambda: _sandbox_processes(item) <= at_rest, seconds=15)
    clock.ahead = 60
    rest = b"".join(events).decode()
    # Then the result is the command's own exit, not a time-out
    result = json.loads(rest.split("event: result\ndata: ", 1)[1].split("\n", 1)[0])
    assert (result["exit_code"], result["timed_out"], result["reason"]) == (3, False, "exited")


@pytest.mark.usefixtures("real_boundary")
@pytest.mark.parametrize("agent", [True, False], ids=["through the exec agent", "through nsenter"])
def test_a_command_that_writes_without_pause_is_killed_at_its_limit_and_reported_timed_out(
    settings, alice_api, make_item, agent
):
    # Given alice (the relay reads what was already sent before it looks at the clock: a command
    # that never stops writing must not keep it reading)
    settings.WORKSPACE_SANDBOX_EXEC_AGENT = agent
    # When she runs a command that writes without pause, with a one-second limit
    body = alice_api.post(
        f"/a/notebook/items/{make_item().pk}/exec", {"command": "yes", "timeout": 1}, format="json"
    ).json()
    # Then it was killed at its limit, and the result says so
    assert (body["timed_out"], body["exit_code"], body["reason"]) == (True, 137, "timed_out")

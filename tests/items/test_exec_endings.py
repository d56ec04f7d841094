"""Why a command ended (issue 30.3) and stopping one (issue 30.4).

An exit code of 137 only says "killed": the result's `reason` says by what (its time limit, the
kernel at the sandbox's memory limit, someone stopping it, its sandbox closed under it), and a
sentence naming the limit or the person ends its stderr. A running command can be stopped,
through the API, by the person who started it or staff, without closing its sandbox.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

from collab import clock
from collab.actor import Actor
from quotas import ledger
from tests.fixtures.items import exec_ok, host_call, item_url
from workspace.items.models import Item, RunningExec

pytestmark = pytest.mark.django_db
SSE = "text/event-stream"


class Stream:
    """A streamed exec read event by event, so a test can act while the command runs."""

    def __init__(self, response) -> None:
        assert response.status_code == 200, response.content
        self.chunks: Iterator[bytes] = iter(response.streaming_content)
        self.pending = ""

    def next_event(self) -> tuple[str, dict]:
        while "\n\n" not in self.pending:
            self.pending += next(self.chunks).decode()
        block, self.pending = self.pending.split("\n\n", 1)
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        return lines["event"], json.loads(lines["data"])

    def until(self, kind: str) -> dict:
        while True:
            event, data = self.next_event()
            if event == kind:
                return data


def _running(api, item: Item, command: str) -> tuple[Stream, str]:
    """Starts `command` (which prints `ready` first) as a stream; returns it once `ready` is out."""
    stream = Stream(api.post(item_url(item, "/exec"), {"command": command}, format="json", HTTP_ACCEPT=SSE))
    exec_id = stream.until("started")["exec_id"]
    assert stream.until("output")["text"].startswith("ready")
    return stream, exec_id


def _stop(api, item: Item, exec_id: str):
    return api.post(item_url(item, f"/execs/{exec_id}/stop"))


def test_a_command_past_its_time_limit_says_so_with_the_limit(alice_api, make_item):
    # Given alice's notebook
    # When a command runs past a timeout of half a second
    result = exec_ok(alice_api, make_item(), "sleep 5", timeout=0.5)
    # Then it says it ran past its time limit of 0.5 s, in the result and at the end of stderr
    assert (result["reason"], result["timed_out"]) == ("timed_out", True)
    assert result["reason_detail"] == "It ran past its time limit of 0.5 s and was stopped."
    assert result["stderr"].endswith("[It ran past its time limit of 0.5 s and was stopped.]\n")


def test_a_command_that_ends_by_itself_has_no_story(alice_api, make_item):
    # Given alice's notebook / When a command fails by itself
    result = exec_ok(alice_api, make_item(), "exit 3")
    # Then its reason is exited, with nothing added to its output
    assert (result["exit_code"], result["reason"], result["reason_detail"], result["stderr"]) == (3, "exited", "", "")


def test_the_requester_stops_a_running_command_and_the_sandbox_runs_on(alice_api, make_item):
    # Given a command of alice's running in her notebook
    item = make_item()
    stream, exec_id = _running(alice_api, item, "echo ready; sleep 30")
    # When she lists the running commands and stops it
    listed = alice_api.get(item_url(item, "/execs")).json()
    stopped = _stop(alice_api, item, exec_id)
    result = stream.until("result")
    # Then it was listed, it stops, its result says she stopped it, and the sandbox is still live
    assert [(row["exec_id"], row["requested_by"], row["command"]) for row in listed] == [
        (exec_id, "alice", "echo ready; sleep 30")
    ]
    assert (stopped.status_code, stopped.json()["stopped_by"]) == (200, "alice")
    assert (result["reason"], result["ended_by"], result["exit_code"]) == ("stopped", "alice", 137)
    assert result["reason_detail"] == "alice stopped it before it finished."
    assert ledger.live_row_of_item(item.pk) is not None
    assert not RunningExec.objects.exists()
    assert exec_ok(alice_api, item, "echo still here")["stdout"] == "still here\n"


def test_staff_stop_someone_elses_command(settings, alice_api, api_client_for, make_item):
    # Given a command of alice's running, and dave made staff
    settings.WORKSPACE_MOCK_STAFF = ["dave"]
    item = make_item()
    stream, exec_id = _running(alice_api, item, "echo ready; sleep 30")
    # When dave stops it
    response = _stop(api_client_for("dave"), item, exec_id)
    # Then it stops and its result names dave
    assert response.status_code == 200
    assert stream.until("result")["reason_detail"] == "dave stopped it before it finished."


def test_a_member_may_see_but_not_stop_anothers_command(alice_api, api_client_for):
    # Given alice's investigation with bob as a member, and a command of alice's running in it
    from workspace.investigations.services import investigation_create

    item = investigation_create(title="Outage", actor=Actor("alice"), members=["bob"]).item
    stream, exec_id = _running(alice_api, item, "echo ready; sleep 30")
    bob = api_client_for("bob")
    # When bob lists the item's commands and tries to stop alice's
    listed = bob.get(item_url(item, "/execs"))
    refused = _stop(bob, item, exec_id)
    # Then he sees it, and stopping it is 403 not_your_command: it runs on until alice stops it
    assert [row["exec_id"] for row in listed.json()] == [exec_id]
    assert (refused.status_code, refused.json()["error"]) == (403, "not_your_command")
    assert RunningExec.objects.get(pk=exec_id).stopped_by == ""
    _stop(alice_api, item, exec_id)
    assert stream.until("result")["ended_by"] == "alice"


@pytest.mark.parametrize(("who", "status", "error"), [("bob", 404, "not_found"), ("carol", 403, "payer_only")])
def test_a_stranger_and_the_payer_cannot_stop_a_command(api_client_for, alice_api, make_item, who, status, error):
    # Given alice's notebook that carol pays for, with a command of alice's running
    item = make_item(created_by="alice", owner="carol")
    stream, exec_id = _running(alice_api, item, "echo ready; sleep 30")
    # When bob (a stranger) or carol (the payer) tries to stop it
    response = _stop(api_client_for(who), item, exec_id)
    # Then it is refused and the command runs on
    assert (response.status_code, response.json()["error"]) == (status, error)
    assert RunningExec.objects.get(pk=exec_id).stopped_by == ""
    _stop(alice_api, item, exec_id)
    stream.until("result")


def test_stopping_a_command_that_is_not_running_is_404(alice_api, make_item):
    # Given alice's notebook whose last command has finished
    item = make_item()
    exec_id = exec_ok(alice_api, item, "true")["exec_id"]
    # When she stops it, and a made-up one
    # Then both are 404 no_running_command
    for name in (exec_id, "nothing-runs-by-this-name"):
        response = _stop(alice_api, item, name)
        assert (response.status_code, response.json()["error"]) == (404, "no_running_command")


@pytest.mark.parametrize("name", ["a" * 31 + "\x00", "A" * 32, "0" * 33, "%00", "é" * 32])
def test_stopping_a_command_by_an_id_of_another_form_is_404_on_every_database(alice_api, make_item, name):
    # Given alice's notebook / When she stops a command by an id no command can have (a NUL in it, say)
    response = _stop(alice_api, make_item(), name)
    # Then it is 404 no_running_command, the same on SQLite and PostgreSQL, and nothing is echoed
    assert (response.status_code, response.json()["error"]) == (404, "no_running_command")
    assert name not in response.json()["detail"]


def test_closing_the_sandbox_under_a_command_says_who_closed_it(alice_api, api_client_for, make_item):
    # Given alice's notebook that carol pays for, with a command of alice's running
    item = make_item(created_by="alice", owner="carol")
    stream, _exec_id = _running(alice_api, item, "echo ready; sleep 30")
    # When carol closes the sandbox from My resources
    assert api_client_for("carol").delete(f"/me/resources/live/{item.pk}").status_code == 204
    result = stream.until("result")
    # Then the command's result says its sandbox was closed, by carol
    assert (result["reason"], result["ended_by"], result["exit_code"]) == ("sandbox_closed", "carol", 137)
    assert result["reason_detail"] == "carol closed its sandbox while it ran."
    assert result["stderr"].endswith("[carol closed its sandbox while it ran.]\n")


@pytest.mark.usefixtures("real_boundary")
def test_a_command_killed_at_the_memory_limit_says_so_with_its_size(alice_api, make_item):
    # Given alice's notebook, whose sandboxes have 64M of memory in the kernel
    item = make_item()
    # When a process there fills 400M
    hog = "a = bytearray(400 * 1024 * 1024); a[::4096] = b'x' * len(a[::4096]); print('survived')"
    result = exec_ok(alice_api, item, ["python3", "-c", hog])
    # Then the kernel killed it, and the result says it used the sandbox's whole 64 MB
    assert (result["exit_code"], result["reason"]) == (137, "memory_limit")
    assert "whole memory limit of 64 MB" in result["reason_detail"]
    assert "survived" not in result["stdout"]


def test_the_sandbox_host_stops_one_command_and_says_so(host):
    # Given a sandbox on the host running a long command named by the app
    _status, created = host_call(f"{host}/sandboxes", "POST", {"item_id": "4"})
    sandbox = f"{host}/sandboxes/{created['id']}"
    answers: list[tuple[int, dict]] = []
    runner = threading.Thread(
        target=lambda: answers.append(
            host_call(f"{sandbox}/exec", "POST", {"command": "sleep 30", "exec_id": "e1", "timeout": 60}, timeout=30)
        )
    )
    runner.start()
    # When the app stops that command (once it runs)
    deadline = time.monotonic() + 10
    while (stopped := host_call(f"{sandbox}/exec/e1", "DELETE"))[0] == 404 and time.monotonic() < deadline:
        time.sleep(0.05)
    runner.join(timeout=30)
    # Then the stop is 204, the exec answers that it was stopped, and the sandbox is alive
    assert stopped[0] == 204
    assert answers[0][1]["reason"] == "stopped"
    assert host_call(sandbox) == (200, {"id": created["id"], "alive": True})
    # And stopping it again, or a command it never ran, is 404
    assert host_call(f"{sandbox}/exec/e1", "DELETE")[0] == 404
    host_call(sandbox, "DELETE")


def test_the_sandbox_host_refuses_an_exec_id_that_is_no_name(host):
    # Given a sandbox on the host
    _status, created = host_call(f"{host}/sandboxes", "POST", {"item_id": "4"})
    # When an exec names itself with a path / Then it is 400 and nothing runs
    status, body = host_call(f"{host}/sandboxes/{created['id']}/exec", "POST", {"command": "true", "exec_id": "../x"})
    assert (status, body["error"]) == (400, "bad_request")
    host_call(f"{host}/sandboxes/{created['id']}", "DELETE")


def test_an_agent_command_past_its_time_limit_says_what_the_limit_was(alice_api, make_item, write_config):
    # Given commands limited to one second, and alice's notebook
    write_config('[sandbox]\nexec_timeout = "1s"\n')
    item = make_item()
    # When she asks the agent to run a command that takes five
    response = alice_api.post(item_url(item, "/messages"), {"content": "$ sleep 5"}, format="json")
    # Then its reply says the command ran past its time limit of 1 s, not only "exit 137"
    reply = response.json()["replies"][0]["content"]
    assert "It ran past its time limit of 1 s and was stopped." in reply


def test_staff_closing_the_sandbox_under_a_command_are_named(settings, alice_api, api_client_for, make_item):
    # Given a command of alice's running, and dave made staff
    settings.WORKSPACE_MOCK_STAFF = ["dave"]
    item = make_item()
    stream, _exec_id = _running(alice_api, item, "echo ready; sleep 30")
    # When dave closes the item's sandbox
    assert api_client_for("dave").delete(item_url(item, "/sandbox")).status_code == 204
    # Then her command's result names him
    result = stream.until("result")
    assert (result["reason"], result["ended_by"]) == ("sandbox_closed", "dave")


def test_listing_running_commands_costs_a_fixed_few_queries(alice_api, make_item, django_assert_max_num_queries):
    # Given alice's notebook with three commands recorded as running
    item = make_item()
    for number in range(3):
        RunningExec.objects.create(
            exec_id=f"e{number}",
            item=item,
            requested_by="alice",
            command="sleep 30",
            backend="local",
            backend_sandbox_id="loc-x",
            ends_by=clock.now() + timedelta(minutes=5),
        )
    # When she lists them / Then it takes the item lookup and one query for the list
    with django_assert_max_num_queries(2):
        listed = alice_api.get(item_url(item, "/execs")).json()
    assert [row["exec_id"] for row in listed] == ["e0", "e1", "e2"]

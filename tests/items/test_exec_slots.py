"""Commands a person runs at once through requests: at most WORKSPACE_EXEC_CONCURRENCY_PER_USER, since
each holds a server thread everyone shares; past it 429 with Retry-After, and nothing runs."""

from __future__ import annotations

import json
import threading

import pytest
from django.core.signals import request_finished
from django.db import close_old_connections, connection

from collab.actor import Actor
from collab.errors import DomainError
from collab.models import CommandSlot
from collab.slots import TooManyRunning, slot_take
from quotas.models import SandboxActivity
from tests.fixtures.exec_agent import wait_for
from tests.fixtures.items import item_url
from workspace.agent.models import ItemMessage
from workspace.items.config import get_config
from workspace.items.lifecycle import ExecStarted
from workspace.items.models import RunningExec
from workspace.items.services import item_exec, item_exec_events
from workspace.sandboxes.filestore import workspace_dir
from workspace.workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db
SSE = "text/event-stream"


@pytest.fixture
def two_at_once(settings) -> int:
    settings.WORKSPACE_EXEC_CONCURRENCY_PER_USER = 2
    return 2


@pytest.fixture
def alice_runs_two(db, two_at_once, clock) -> list[CommandSlot | None]:
    """alice has two commands running (in other requests), the most she may."""
    return [slot_take(user_id="alice", seconds=30) for _ in range(two_at_once)]


def _exec(api, item, command="true", **extra):
    return api.post(item_url(item, "/exec"), {"command": command}, format="json", **extra)


def test_a_third_command_is_429_with_retry_after_and_opens_nothing(alice_api, make_item, alice_runs_two):
    # Given alice runs two commands, the most she may
    # When she starts a third
    response = _exec(alice_api, make_item())

    # Then it is refused with 429, when to try again and why, and no sandbox was opened
    assert response.status_code == 429
    assert response["Retry-After"] == "5"
    body = response.json()
    assert (body["error"], body["limit"]) == ("too_many_running_commands", 2)
    assert "2 commands running at once" in body["detail"]
    assert not SandboxActivity.objects.exists()


def test_a_command_over_the_limit_on_a_live_sandbox_is_429_and_records_nothing(
    alice_api, make_item, two_at_once, clock
):
    # Given alice's item with a live sandbox, and two commands of hers running elsewhere
    item = make_item()
    assert _exec(alice_api, item).status_code == 200
    before = SandboxActivity.current.get(item_id=str(item.pk))
    slots = [slot_take(user_id="alice", seconds=30) for _ in range(two_at_once)]
    clock.advance(seconds=5)
    # When she starts a third there (the slot is taken in the transaction that records a command)
    response = _exec(alice_api, item)
    # Then it is refused, no command is recorded, the sandbox's lease did not move, no slot was added
    assert response.status_code == 429
    assert not RunningExec.objects.exists()
    after = SandboxActivity.current.get(item_id=str(item.pk))
    assert (after.last_seen_at, after.lease_expires_at) == (before.last_seen_at, before.lease_expires_at)
    assert CommandSlot.objects.filter(user_id="alice").count() == len(slots)


def test_a_refused_stream_is_json_before_any_event(alice_api, make_item, alice_runs_two):
    # Given alice runs two commands, the most she may
    # When she opens a terminal stream for a third
    response = _exec(alice_api, make_item(), HTTP_ACCEPT=SSE)

    # Then the 429 answers as JSON with Retry-After
    assert (response.status_code, response["Retry-After"]) == (429, "5")
    assert json.loads(response.content)["error"] == "too_many_running_commands"


def test_another_persons_commands_are_not_limited_by_hers(bob_api, make_item, alice_runs_two):
    # Given alice runs two commands, the most she may
    # When bob runs one in his notebook / Then it runs
    response = _exec(bob_api, make_item(created_by="bob"), "echo hi")
    assert (response.status_code, response.json()["stdout"]) == (200, "hi\n")


def test_a_finished_command_gives_its_slot_back(alice_api, make_item, two_at_once):
    # Given alice's notebook, and a limit of two
    item = make_item()
    # When she runs three commands one after another / Then each runs, and no slot stays held
    assert [_exec(alice_api, item).status_code for _ in range(3)] == [200, 200, 200]
    assert not CommandSlot.objects.exists()


def test_a_refused_command_gives_its_slot_back(write_config, alice_api, make_item, two_at_once):
    # Given alice may run one sandbox and has one live
    write_config("[resources.per_user]\ncount = 1\n")
    assert _exec(alice_api, make_item()).status_code == 200
    # When a command in another notebook is refused by the quota gate (plain and streamed)
    assert _exec(alice_api, make_item()).status_code == 507
    assert _exec(alice_api, make_item(), HTTP_ACCEPT=SSE).status_code == 507
    # Then no slot stays held
    assert not CommandSlot.objects.exists()


def test_a_stream_the_client_leaves_gives_its_slot_back(make_item, two_at_once):
    # Given alice streaming a command that would write for a while
    events = item_exec_events(
        item=make_item(), app=get_config().app("notebook"), command="for i in 1 2 3; do echo $i; sleep 0.2; done",
        actor=Actor("alice"),
    )  # fmt: skip
    assert isinstance(next(events), ExecStarted)
    assert CommandSlot.objects.count() == 1

    # When she goes away after the first event (the server closes the stream)
    events.close()

    # Then her slot is free again
    assert not CommandSlot.objects.exists()


def test_a_slot_left_by_a_process_that_died_frees_after_its_command_could_have_ended(
    alice_api, make_item, alice_runs_two, clock
):
    # Given alice's two slots, held by requests whose process died (30 s commands)
    # When 30 s and the minute of margin have passed
    clock.advance(seconds=91)
    # Then she may run a command again
    assert _exec(alice_api, make_item()).status_code == 200


def test_a_manual_workflow_run_over_the_limit_is_429_and_records_nothing(
    alice_api, make_item, make_workflow, alice_runs_two
):
    # Given alice runs two commands, the most she may
    item, workflow_id = make_item(), make_workflow(["echo never"])
    # When she runs a workflow
    response = alice_api.post(item_url(item, f"/workflows/{workflow_id}/run"), format="json")
    # Then it is refused with Retry-After and no run is recorded
    assert (response.status_code, response["Retry-After"]) == (429, "5")
    assert not WorkflowRun.objects.exists()


def test_a_chat_message_over_the_limit_is_429_and_stores_nothing(alice_api, make_item, alice_runs_two):
    # Given alice runs two commands, the most she may
    # When she sends a chat message that would run a command
    response = alice_api.post(item_url(make_item(), "/messages"), {"content": "run: echo hi"}, format="json")
    # Then it is refused with Retry-After and her message is not stored
    assert (response.status_code, response["Retry-After"]) == (429, "5")
    assert not ItemMessage.objects.exists()


def test_a_streamed_chat_turn_holds_a_slot_until_it_ends(alice_api, make_item, two_at_once):
    # Given alice's notebook
    # When she sends a message that runs a command, reading the turn as it streams
    response = alice_api.post(
        item_url(make_item(), "/messages"), {"content": "$ echo hi"}, format="json", HTTP_ACCEPT=SSE
    )
    stream = b"".join(response.streaming_content)

    # Then the turn ran, and once it ended her slot is free again
    assert b"event: turn" in stream
    assert not CommandSlot.objects.exists()


def test_no_limit_when_set_to_zero(alice_api, make_item, settings):
    # Given no limit on commands at once
    settings.WORKSPACE_EXEC_CONCURRENCY_PER_USER = 0
    # When alice takes slot after slot / Then none is refused and none is recorded
    assert [slot_take(user_id="alice", seconds=30) for _ in range(5)] == [None] * 5
    assert _exec(alice_api, make_item()).status_code == 200


@pytest.mark.postgres(reason="SQLite runs one writer at a time, so there is no race to lose")
@pytest.mark.django_db(transaction=True)
def test_racing_requests_get_exactly_the_limit(two_at_once, clock):
    # Given PostgreSQL, where writers really race, a limit of two, and eight requests of alice
    # starting commands at the same moment
    start, outcomes = threading.Barrier(8), []

    def take() -> None:
        start.wait(10)
        try:
            outcomes.append(slot_take(user_id="alice", seconds=30) is not None)
        except TooManyRunning:
            outcomes.append(False)
        except DomainError as exc:  # anything else would be a bug: make it visible
            outcomes.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    # Then exactly two got a slot
    assert sorted(outcomes) == [False] * 6 + [True] * 2
    assert CommandSlot.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_slots_taken_in_transactions_of_their_own_are_stored_with_the_ids_they_return(two_at_once, clock):
    # Given no transaction around (on PostgreSQL each slot's INSERT goes with its COMMIT, and its
    # id is read after it)
    # When alice takes both her slots, then asks for a third
    taken = [slot_take(user_id="alice", seconds=30) for _ in range(2)]
    with pytest.raises(TooManyRunning):
        slot_take(user_id="alice", seconds=30)
    # Then the two are stored, committed, with the ids and numbers they were returned with
    assert sorted((slot.pk, slot.slot) for slot in taken) == sorted(
        CommandSlot.objects.filter(user_id="alice").values_list("pk", "slot")
    )
    assert {slot.slot for slot in taken} == {0, 1}


@pytest.mark.postgres(reason="SQLite runs one writer at a time, so there is no race to lose")
@pytest.mark.django_db(transaction=True)
def test_commands_racing_on_a_live_sandbox_run_exactly_the_limit_and_leave_nothing(make_item, two_at_once):
    # Given PostgreSQL, alice's item with a live sandbox, a limit of two, and four commands of hers
    # starting at the same moment there, each claiming her first slot without looking
    item, app = make_item(), get_config().app("notebook")
    item_exec(item=item, app=app, command="true", actor=Actor("alice"))
    go = workspace_dir(item.pk) / "go"
    start, outcomes = threading.Barrier(4), []

    def run() -> None:
        start.wait(10)
        try:
            # The commands that run wait until the refused ones are told, so no slot frees early.
            item_exec(item=item, app=app, command="until [ -f go ]; do sleep 0.01; done", actor=Actor("alice"))
            outcomes.append("ran")
        except TooManyRunning:
            outcomes.append("429")
        except Exception as exc:  # anything else would be a bug: make it visible
            outcomes.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    wait_for(lambda: outcomes.count("429") == 2 or len(outcomes) == 4)
    go.write_text("")
    for thread in threads:
        thread.join(30)

    # Then exactly two ran, two were refused, and no slot or record is left behind
    assert sorted(outcomes) == ["429", "429", "ran", "ran"]
    assert not CommandSlot.objects.exists()
    assert not RunningExec.objects.exists()


def test_a_stream_closed_before_its_first_byte_stops_its_command_and_gives_everything_back(alice_api, make_item):
    # Given alice's streamed command, started (its slot taken, its record written) but not read
    response = alice_api.post(item_url(make_item(), "/exec"), {"command": "sleep 30"}, format="json", HTTP_ACCEPT=SSE)
    assert response.status_code == 200
    assert (CommandSlot.objects.count(), RunningExec.objects.count()) == (1, 1)
    # When the server closes it, the client having left before the first byte (as the test client
    # does, without the signal that would close this test's database connection)
    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)
    # Then her slot and the command's record are gone at once
    assert (CommandSlot.objects.count(), RunningExec.objects.count()) == (0, 0)

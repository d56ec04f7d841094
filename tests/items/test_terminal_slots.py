"""A terminal counts in its opener's concurrency (issue 43): while a command runs in its foreground
it holds one of their WORKSPACE_EXEC_CONCURRENCY_PER_USER command slots, as an exec does; at the
prompt it holds none. A reload does not take a second slot, closing the terminal or its sandbox
gives it back, and a command started while every slot is taken is stopped, the client told why."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest

from collab.models import CommandSlot
from collab.slots import slot_release, slot_take
from tests.fixtures.terminals import ANSWER_WAIT_SECONDS, read_until, terminal_url
from workspace.items.models import Terminal

pytestmark = pytest.mark.django_db(transaction=True)


def _slots_of_alice() -> int:
    return CommandSlot.objects.filter(user_id="alice").count()


def _until(condition: Callable[[], bool]) -> bool:
    """Whether `condition` came to hold while the server heard the keeper (a wait, not a measure)."""
    deadline = time.monotonic() + ANSWER_WAIT_SECONDS
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def _live(connection) -> None:
    read_until(connection, lambda output, controls: any(c["type"] == "live" for c in controls))


def test_a_command_running_in_a_terminal_holds_one_slot_until_it_ends(socket_to, opened):
    # Given alice's terminal at its prompt, which holds no slot
    connection = socket_to(opened)
    _live(connection)
    assert _slots_of_alice() == 0
    # When she runs a long command in it, then interrupts it once it runs as itself
    connection.send(b"sh -c 'echo go''ing; exec sleep 100'\n")
    read_until(connection, lambda output, controls: b"going\r\n" in output)
    held_while_running = _until(lambda: _slots_of_alice() == 1)
    connection.send(json.dumps({"type": "signal", "name": "INT"}))
    # Then the command held one of her slots while it ran, and gave it back when it ended
    assert held_while_running
    assert _until(lambda: _slots_of_alice() == 0)


def test_a_reconnect_while_a_command_runs_renews_its_slot_rather_than_taking_another(socket_to, opened):
    # Given alice's terminal running a long command, holding one slot
    connection = socket_to(opened)
    _live(connection)
    connection.send(b"sleep 100\n")
    assert _until(lambda: _slots_of_alice() == 1)
    held_until = Terminal.objects.get(pk=opened["id"]).slot_expires_at
    # When her page reloads: the connection drops and another takes its place
    connection.close()
    again = socket_to(opened)
    _live(again)
    # Then the one slot is renewed for the terminal, and no second one is taken
    assert _until(lambda: Terminal.objects.get(pk=opened["id"]).slot_expires_at != held_until)
    assert _slots_of_alice() == 1


@pytest.fixture
def one_slot_taken_elsewhere(settings) -> Iterator[CommandSlot | None]:
    """alice may run one command at once, and one of hers runs elsewhere (released at the end)."""
    settings.WORKSPACE_EXEC_CONCURRENCY_PER_USER = 1
    elsewhere = slot_take(user_id="alice", seconds=60)
    yield elsewhere
    slot_release(elsewhere)


def _start_long_command(connection) -> tuple[bytes, list[dict]]:
    """`sleep 100` typed at the prompt, and what the terminal said until job control stopped it."""
    _live(connection)
    connection.send(b"sleep 100\n")
    return read_until(connection, lambda output, controls: b"Stopped" in output)


def test_a_command_started_while_every_slot_is_taken_is_stopped_and_the_client_told_why(
    one_slot_taken_elsewhere, socket_to, opened
):
    # Given alice's one slot is taken elsewhere
    # When she starts a long command in her terminal
    output, controls = _start_long_command(socket_to(opened))
    # Then it is stopped, as Ctrl-Z would, she is told why, and it holds no slot
    stopped = [control for control in controls if control["type"] == "stopped"]
    assert stopped, (output, controls)
    assert stopped[0]["error"] == "too_many_running_commands"
    assert "fg" in stopped[0]["detail"]
    assert b"Stopped" in output
    assert _slots_of_alice() == 1


def test_a_command_that_ignores_sigtstp_is_stopped_all_the_same(one_slot_taken_elsewhere, socket_to, opened):
    # Given alice's one slot is taken elsewhere
    connection = socket_to(opened)
    _live(connection)
    # When she starts a long command that ignores SIGTSTP (Ctrl-Z)
    connection.send(b"bash -c \"trap '' TSTP; exec sleep 100\"\n")
    output, controls = read_until(connection, lambda output, controls: b"Stopped" in output)
    # Then it is stopped all the same, and she is told why
    assert b"Stopped" in output
    assert [control["error"] for control in controls if control["type"] == "stopped"] == ["too_many_running_commands"]


def test_a_job_in_the_background_holds_a_slot_too(socket_to, opened):
    # Given alice's terminal at its prompt
    connection = socket_to(opened)
    _live(connection)
    # When she starts a long command in the background
    connection.send(b"sleep 100 &\n")
    # Then it holds one of her slots, though the shell has the foreground
    assert _until(lambda: _slots_of_alice() == 1)


def test_a_stopped_job_resumed_in_the_background_is_stopped_again(one_slot_taken_elsewhere, socket_to, opened):
    # Given alice's command stopped while her one slot is taken elsewhere
    connection = socket_to(opened)
    _start_long_command(connection)
    # When she resumes it in the background
    connection.send(b"bg\n")
    _output, controls = read_until(
        connection, lambda output, controls: [c["type"] for c in controls].count("stopped") >= 1
    )
    connection.send(b"jobs\n")
    output, _more = read_until(connection, lambda output, controls: b"Stopped" in output)
    # Then it is stopped again, she is told so again, and it holds no slot
    assert [control["type"] for control in controls].count("stopped") == 1
    assert b"Stopped" in output
    assert _slots_of_alice() == 1


def test_a_command_resumed_once_a_slot_is_free_runs_and_holds_it(one_slot_taken_elsewhere, socket_to, opened):
    # Given alice's command in her terminal was stopped while her only slot was taken
    connection = socket_to(opened)
    _start_long_command(connection)
    # When the other command ends and she resumes hers
    slot_release(one_slot_taken_elsewhere)
    connection.send(b"fg\n")
    # Then it runs, holding her slot
    held = _until(lambda: Terminal.objects.get(pk=opened["id"]).slot_id is not None)
    assert held, read_until(connection, lambda output, controls: False)
    assert _slots_of_alice() == 1


@pytest.mark.parametrize("closing", ["terminal", "sandbox"])
def test_closing_the_terminal_or_its_sandbox_gives_back_its_running_commands_slot(
    api_client_for, alice_item, socket_to, opened, closing
):
    # Given alice's terminal running a long command, holding one slot
    connection = socket_to(opened)
    _live(connection)
    connection.send(b"sleep 100\n")
    assert _until(lambda: _slots_of_alice() == 1)
    # When she closes the terminal, or the notebook's sandbox
    suffix = f"/terminals/{opened['id']}" if closing == "terminal" else "/sandbox"
    assert api_client_for("alice").delete(terminal_url(alice_item, suffix)).status_code in (200, 204)
    # Then the slot is hers again, and the terminal is closed
    assert _slots_of_alice() == 0
    assert Terminal.objects.get(pk=opened["id"]).closed_at is not None

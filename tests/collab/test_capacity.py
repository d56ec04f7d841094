"""The process-wide bounds on long work (collab.capacity): how many at once, a refusal that says
when to come back, and a shutdown that takes no more and stops what runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.urls import resolve

from collab import capacity
from collab.edge import headers_of, status_of


@pytest.fixture
def taking_again() -> Iterator[None]:
    """A test that stops the process's intake gets it back afterwards."""
    yield
    capacity.resume_taking()


def test_a_bound_refuses_the_ticket_past_its_limit_with_503_and_retry_after():
    # Given a bound of two, both taken
    bound = capacity.Bound("commands", lambda: 2)
    first, second = bound.ticket(), bound.ticket()
    # When a third is asked for / Then it is refused as the server being busy, saying when to come back
    with pytest.raises(capacity.ServerBusy) as refused:
        bound.ticket()
    assert (status_of(refused.value), refused.value.error) == (503, "server_busy")
    assert headers_of(refused.value) == {"Retry-After": "5"}
    assert "2" in refused.value.detail
    # And once one is given back (twice over, as a stream's end and its close may both do), one more fits
    first.release()
    first.release()
    assert bound.taken == 1
    bound.ticket()
    second.release()


def test_a_limit_of_zero_bounds_nothing():
    bound = capacity.Bound("commands", lambda: 0)
    tickets = [bound.ticket() for _ in range(50)]
    assert bound.taken == 50
    for ticket in tickets:
        ticket.release()


def test_a_process_that_stops_taking_refuses_new_work_and_stops_what_runs(taking_again):
    # Given a running command whose ticket knows how to stop it
    stopped: list[str] = []
    running = capacity.running_commands.ticket()
    running.stop_with(lambda: stopped.append("the command"))
    # When the process begins to shut down
    capacity.stop_taking()
    # Then the command was stopped, and no new long work is taken
    assert stopped == ["the command"]
    with pytest.raises(capacity.ServerStopping) as refused:
        capacity.long_work.ticket()
    assert refused.value.error == "server_stopping"
    # And work admitted just before, whose stop comes late, is stopped at once
    late: list[str] = []
    running.stop_with(lambda: late.append("late"))
    assert late == ["late"]
    running.release()


@pytest.mark.parametrize(
    ("path", "method", "long"),
    [
        ("/a/notebook/items/1/messages", "POST", True),
        ("/a/notebook/items/1/messages", "GET", False),
        ("/kb/chats/3/messages", "POST", True),
        ("/a/notebook/items/1/workflows/5/run", "POST", True),
        ("/workflows/5/run", "POST", True),
        ("/a/notebook/items/1/exec", "POST", False),
        ("/me", "GET", False),
    ],
)
def test_model_turns_and_workflow_runs_are_long_work_and_commands_are_not(path, method, long):
    # Given the view a path resolves to / When asked whether the method is long work / Then it says
    assert capacity.is_long_work(resolve(path).func, method) is long

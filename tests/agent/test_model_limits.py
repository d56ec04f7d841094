"""The model agent's turns are bounded: tool calls, wall-clock seconds, the tokens of conversation sent
to the model (older messages left out first, said in the trail), and the size of one tool's output.
Hitting a bound ends the turn with a message saying which."""

from __future__ import annotations

import pytest

from tests.fixtures.items import item_url
from tests.fixtures.llm import Call, Hang, Reply
from workspace.agent import model
from workspace.agent.messages import message_append
from workspace.agent.models import ItemMessage

pytestmark = pytest.mark.django_db


def _send(api, item, content):
    return api.post(item_url(item, "/messages"), {"content": content}, format="json")


def test_a_turn_stops_at_its_limit_of_tool_calls_and_says_so(alice_api, make_item, model_agent, settings):
    # Given at most two tool calls per turn, and a model that keeps calling tools
    settings.WORKSPACE_AGENT_MAX_TOOL_CALLS = 2
    model_agent.reply = lambda request: Reply(tool_calls=[Call("list_files", {})])
    # When alice sends a message
    reply = _send(alice_api, make_item(), "look around").json()["replies"][0]
    # Then two calls ran (the third one asked for was not made), and the reply says which limit ended the turn
    assert len(reply["steps"]) == 2
    assert len(model_agent.chat_requests) == 3
    assert reply["content"] == "I stopped here: this turn reached its limit of 2 tool calls."


def test_the_limit_counts_calls_made_in_one_message(alice_api, make_item, model_agent, settings):
    # Given at most two tool calls per turn, and a model asking for three at once after some words
    settings.WORKSPACE_AGENT_MAX_TOOL_CALLS = 2
    model_agent.push(Reply("Checking three things.", tool_calls=[Call("list_files", {})] * 3))
    # When alice sends a message
    reply = _send(alice_api, make_item(), "check").json()["replies"][0]
    # Then two ran; the words the model wrote stay, followed by the limit
    assert len(reply["steps"]) == 2
    assert reply["content"] == "Checking three things.\n\nI stopped here: this turn reached its limit of 2 tool calls."


def test_a_turn_stops_at_its_wall_clock_limit_and_says_so(alice_api, make_item, model_agent, settings, monkeypatch):
    # Given a 60-second turn on a clock that jumps past it while the model answers with a tool call
    settings.WORKSPACE_AGENT_TURN_SECONDS = 60
    moment = [1000.0]
    monkeypatch.setattr(model, "_now", lambda: moment[0])

    def late(request):
        moment[0] += 61
        return Reply(tool_calls=[Call("run_command", {"command": "touch never"})])

    model_agent.reply = late
    item = make_item()
    # When alice sends a message
    reply = _send(alice_api, item, "do it").json()["replies"][0]
    # Then the call was not made, and the reply says the turn ran out of time
    assert reply["steps"] == []
    assert reply["content"] == "I stopped here: this turn reached its limit of 60 seconds."
    assert alice_api.get(item_url(item, "/files")).json() == []


def test_a_model_slower_than_what_is_left_of_the_turn_ends_it_at_its_limit(
    alice_api, make_item, model_agent, settings, monkeypatch
):
    # Given a turn with half a second left when the model is asked, and a model that never answers
    settings.WORKSPACE_AGENT_TURN_SECONDS = 30
    readings = iter([0.0])
    monkeypatch.setattr(model, "_now", lambda: next(readings, 29.5))
    model_agent.push(Hang())
    # When alice sends a message
    reply = _send(alice_api, make_item(), "hello").json()["replies"][0]
    # Then the request was cut at what was left, and the reply names the turn's limit, not the provider
    assert reply["content"] == "I stopped here: this turn reached its limit of 30 seconds."


def test_older_messages_are_left_out_to_fit_the_token_budget_and_the_trail_says_so(
    alice_api, make_item, model_agent, settings
):
    # Given a conversation of ten long messages and a budget that holds about two of them
    item = make_item()
    for number in range(10):
        message_append(item=item, role=ItemMessage.Role.USER, content=f"old {number} " + "x" * 2000, user_id="alice")
    settings.WORKSPACE_AGENT_CONTEXT_TOKENS = 2500
    model_agent.push(Reply("Noted."))
    # When alice sends a message
    reply = _send(alice_api, item, "what did I say last?").json()["replies"][0]
    # Then the model got the newest messages only, hers last, and the trail says how many were left out
    sent = [m["content"][:5] for m in model_agent.chat_requests[0].messages[1:]]
    assert sent[-1] == "what "
    assert sent[:-1] == [f"old {n}" for n in range(10 - len(sent) + 1, 10)]
    left_out = 10 - (len(sent) - 1)
    assert left_out > 0
    assert [(s["kind"], s["summary"]) for s in reply["steps"]] == [
        ("note", f"{left_out} earlier messages of this conversation were left out of what the model was sent, "
                 "to stay within its budget of 2500 tokens."),
    ]  # fmt: skip


def test_a_turn_whose_tool_results_outgrow_the_token_budget_stops_and_says_so(
    alice_api, make_item, model_agent, settings
):
    # Given a budget with room for the instructions and one large tool result only
    settings.WORKSPACE_AGENT_CONTEXT_TOKENS = 2200
    settings.WORKSPACE_AGENT_TOOL_OUTPUT_CHARS = 3000
    model_agent.reply = lambda request: Reply(
        tool_calls=[Call("run_command", {"command": "head -c 2900 /dev/zero | tr '\\0' a"})]
    )
    # When alice sends a message
    reply = _send(alice_api, make_item(), "print a lot").json()["replies"][0]
    # Then the turn stops once what it would send is over the budget
    assert reply["content"] == "I stopped here: the conversation reached its budget of 2200 tokens."
    assert len(reply["steps"]) >= 1


def test_a_tools_output_is_cut_to_the_stated_size_for_the_model_and_the_trail(
    alice_api, make_item, model_agent, settings
):
    # Given tool output cut at 100 characters, and a command printing 250
    settings.WORKSPACE_AGENT_TOOL_OUTPUT_CHARS = 100
    model_agent.push(
        Reply(tool_calls=[Call("run_command", {"command": "head -c 250 /dev/zero | tr '\\0' b"})]), Reply("ok")
    )
    # When alice sends a message
    step = _send(alice_api, make_item(), "print").json()["replies"][0]["steps"][0]
    # Then the model and the trail get the first 100 characters and a line saying how much was cut
    given = model_agent.chat_requests[1].messages[-1]["content"]
    assert given == step["output"]
    assert given == "exit code 0\n" + "b" * 88 + "\n[cut: 162 more characters not shown]"


def test_a_reply_cut_by_the_models_own_token_limit_says_so(alice_api, make_item, model_agent, settings):
    # Given a model that stops at its token limit for one answer
    settings.WORKSPACE_LLM_MAX_TOKENS = 50
    model_agent.push(Reply("The first part of a long", finish_reason="length"))
    # When alice sends a message
    reply = _send(alice_api, make_item(), "tell me everything").json()["replies"][0]
    # Then the reply keeps what came and says why it stops there
    assert reply["content"] == (
        "The first part of a long\n\nThe reply stops here: the model reached its limit of 50 tokens for one answer."
    )

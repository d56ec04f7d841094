"""The model agent when things go wrong: a provider down, slow, rate-limiting, failing or cut off
midway ends the turn with one sentence and keeps the user's message; a bad tool call goes back to
the model as a tool error and the turn goes on; the gate still refuses before anything is stored."""

from __future__ import annotations

import json
import socket

import pytest

from collab.models import Notification
from tests.fixtures.agent import model_descriptors, sse_events
from tests.fixtures.items import item_url
from tests.fixtures.llm import Call, Endless, Garbage, Hang, HttpError, RateLimited, Reply, Stream
from workspace.agent import model_tools
from workspace.agent.models import AgentStep, ItemMessage
from workspace.agent.turns import FAILED_TURN

pytestmark = pytest.mark.django_db
ITEM_TOOLS = "run_command, ask_knowledge, list_files, read_file, write_file"


def _send(api, item, content, **extra):
    return api.post(item_url(item, "/messages"), {"content": content}, format="json", **extra)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _stored() -> list[tuple[str, str]]:
    return list(ItemMessage.objects.order_by("pk").values_list("role", "content"))


def test_a_provider_that_cannot_be_reached_ends_the_turn_in_one_sentence_and_keeps_the_message(
    alice_api, make_item, model_agent, settings
):
    # Given the model agent's provider on a port nobody listens on
    settings.WORKSPACE_LLM_BASE_URL = f"http://127.0.0.1:{_closed_port()}/v1"
    # When alice sends a message
    response = _send(alice_api, make_item(), "list my files")
    # Then the send succeeds, her message is kept and the reply says what happened in one sentence
    assert response.status_code == 201
    assert _stored() == [
        ("user", "list my files"), ("agent", "The model server could not be reached, so this turn ended."),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("scripted", "sentence"),
    [
        (RateLimited(retry_after=7),
         "The model server is rate-limiting requests and asks to wait 7 seconds, so this turn ended."),
        (HttpError(503), "The model server failed (HTTP 503), so this turn ended."),
        (Garbage(), "The model server stopped in the middle of its answer, so this turn ended."),
        (Hang(), "The model server did not answer within 0.5 seconds, so this turn ended."),
        (Endless("line"), "The model server sent a line of more than 1,048,576 bytes, so this turn ended."),
        (Endless("line", block_bytes=1, interval=0.05),
         "The model server did not answer within 0.5 seconds, so this turn ended."),
        (Endless("body"), "The model server sent a line of more than 1,048,576 bytes, so this turn ended."),
    ],
    ids=["429", "5xx", "garbage", "slow", "endless-line", "trickled-line", "gigabyte-body"],
)  # fmt: skip
def test_a_failing_provider_ends_the_turn_saying_how(alice_api, make_item, model_agent, settings, scripted, sentence):
    # Given a provider that rate-limits, fails, answers garbage or hangs
    settings.WORKSPACE_LLM_TIMEOUT = 0.5
    model_agent.push(scripted)
    # When alice sends a message
    response = _send(alice_api, make_item(), "hello")
    # Then her message is kept and the one reply is that sentence
    assert response.status_code == 201
    assert _stored() == [("user", "hello"), ("agent", sentence)]


def test_a_provider_dying_mid_stream_withdraws_the_text_and_stores_no_half_reply(alice_api, make_item, model_agent):
    # Given a model that runs a command, then starts its reply and is cut off
    model_agent.push(
        Reply(tool_calls=[Call("run_command", {"command": "echo before"})]),
        Stream(["All went ", "well and"], then="cut"),
    )
    item = make_item()
    # When alice sends a message and reads the turn as server-sent events
    events = sse_events(_send(alice_api, item, "run it", HTTP_ACCEPT="text/event-stream"))
    # Then the half reply was shown, then withdrawn with the reason
    names = [name for name, _ in events]
    assert names == ["tool", "step", "delta", "delta", "restart", "turn"]
    assert events[4][1] == {"detail": "The model server stopped in the middle of its answer."}
    # And what is stored is her message and one sentence, with the command it ran in the trail
    assert _stored() == [
        ("user", "run it"),
        ("agent", "The model server stopped in the middle of its answer, so this turn ended after 1 tool call."),
    ]
    assert list(AgentStep.objects.values_list("tool", "ok")) == [("run_command", True)]
    assert events[-1][1]["replies"][0]["steps"][0]["output"] == "exit code 0\nbefore\n"


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (Call("run_command", "{not json"),
         "the arguments are not valid JSON (Expecting property name enclosed in double quotes at character 1)"),
        (Call("run_command", "[1, 2]"), "the arguments must be a JSON object"),
        (Call("run_command", {}), "run_command needs the argument 'command'"),
        (Call("run_command", {"command": ["ls"]}), "'command' must be a string"),
        (Call("run_command", {"command": "ls", "su": 1}), "run_command takes no argument 'su' (it takes command)"),
        (Call("delete_everything", {}), f"there is no tool 'delete_everything'; the tools are {ITEM_TOOLS}"),
        (Call("set_status", {"status": "closed"}), f"there is no tool 'set_status'; the tools are {ITEM_TOOLS}"),
    ],
    ids=["malformed", "not-an-object", "missing", "wrong-type", "unknown-argument", "unknown-tool", "not-offered"],
)  # fmt: skip
def test_a_bad_tool_call_goes_back_to_the_model_as_a_tool_error_and_the_turn_goes_on(
    alice_api, make_item, model_agent, call, error
):
    # Given a model whose tool call is malformed, names no tool it has, or has bad arguments
    model_agent.push(Reply(tool_calls=[call]), Reply("Sorry, I could not do that."))
    item = make_item()
    # When alice sends a message
    reply = _send(alice_api, item, "go").json()["replies"][0]
    # Then the model was told the error as the call's result, and answered again
    result = model_agent.chat_requests[1].messages[-1]
    assert (result["role"], result["content"]) == ("tool", f"Error: {error}")
    assert reply["content"] == "Sorry, I could not do that."
    # And the trail shows the refused call; nothing ran
    assert [(s["tool"], s["ok"]) for s in reply["steps"]] == [(call.name, False)]
    assert alice_api.get(item_url(item, "/files")).json() == []


def test_a_tool_name_with_a_nul_cannot_erase_the_trail_of_what_the_model_did(alice_api, make_item, model_agent):
    # Given a model that runs a command, then calls a "tool" whose name holds a NUL character
    # (PostgreSQL stores none: the whole turn's storage failed, and with it the trail of the command)
    model_agent.push(
        Reply(tool_calls=[Call("run_command", {"command": "echo ran > ran.txt"}), Call("hide\x00me", {})]),
        Reply("Nothing to see."),
    )
    item = make_item()
    # When alice sends a message
    response = _send(alice_api, item, "go")
    # Then the reply is stored with both steps: the command that ran, and the refused call, named
    # with the NUL replaced
    assert response.status_code == 201
    reply = response.json()["replies"][0]
    assert [(s["tool"], s["ok"]) for s in reply["steps"]] == [("run_command", True), ("hide\ufffdme", False)]
    assert AgentStep.objects.count() == 2


@pytest.mark.parametrize(
    ("call", "step"),
    [
        (Call("write_file", '{"path": "a.txt", "content": "x\\ud800y"}'), ("write_file", True)),
        (Call("run_command", '{"command": "echo \\ud800"}'), ("run_command", True)),
        (Call("ask_knowledge", '{"question": "backups \\ud800"}'), ("ask_knowledge", True)),
        (Call("rea\ud800d", "{}"), ("rea\ufffdd", False)),
    ],
    ids=["write_file", "run_command", "ask_knowledge", "tool-name"],
)
def test_a_lone_surrogate_from_the_model_is_replaced_and_the_turn_and_its_trail_are_stored(
    alice_api, make_item, model_agent, call, step
):
    # Given a model whose tool call (or reply) holds a lone surrogate: valid JSON ("\ud800"), but
    # no database encodes it (the turn failed, or the request was a 500)
    model_agent.push(Reply(tool_calls=[call]), Reply("done \ud800 here"))
    # When alice sends a message
    response = _send(alice_api, make_item(), "go")
    # Then the turn and its trail are stored, the surrogate replaced
    assert response.status_code == 201
    reply = response.json()["replies"][0]
    assert [(s["tool"], s["ok"]) for s in reply["steps"]] == [step]
    assert "\ud800" not in json.dumps(reply, ensure_ascii=False)


def test_a_refused_tool_call_goes_back_as_a_tool_error(alice_api, make_item, model_agent):
    # Given a model that reads a path leading out of the workspace, then a file that is not there
    model_agent.push(
        Reply(tool_calls=[Call("read_file", {"path": "../../etc/passwd"}), Call("read_file", {"path": "gone.txt"})]),
        Reply("Neither can be read."),
    )
    # When alice asks
    reply = _send(alice_api, make_item(), "read them").json()["replies"][0]
    # Then both were refused by the file store, each told to the model as a tool error
    results = [m["content"] for m in model_agent.chat_requests[1].messages if m["role"] == "tool"]
    assert results[0].startswith("Error: ")
    assert "workspace" in results[0]
    assert results[1] == "Error: There is no file 'gone.txt'."
    assert [s["ok"] for s in reply["steps"]] == [False, False]


def test_a_write_past_the_apps_disk_limit_is_refused_as_a_tool_error_and_nothing_is_written(
    alice_api, make_item, model_agent, write_config
):
    # Given notebooks limited to 1 KiB of disk, and a model that writes 4 KiB
    apps = model_descriptors()
    apps["notebook.toml"] = apps["notebook.toml"].replace("[resources]", '[resources]\ndisk = "1K"')
    write_config('[sandbox]\nworkspace_quota = "1G"\n', apps)
    model_agent.push(Reply(tool_calls=[Call("write_file", {"path": "big.txt", "content": "x" * 4096})]), Reply("No."))
    item = make_item()
    # When alice asks for it
    reply = _send(alice_api, item, "write a big file").json()["replies"][0]
    # Then the disk check refused it as it refuses her own upload, and the workspace is unchanged
    step = reply["steps"][0]
    assert (step["tool"], step["ok"]) == ("write_file", False)
    assert "disk" in step["output"].lower()
    assert alice_api.get(item_url(item, "/files")).json() == []


def test_an_agent_failing_halfway_keeps_the_message_and_the_steps_it_took(
    alice_api, make_item, model_agent, monkeypatch
):
    # Given a model that runs a command, then writes a file, and a bug in the write tool
    model_agent.push(
        Reply(
            tool_calls=[Call("run_command", {"command": "echo one"}), Call("write_file", {"path": "a", "content": "b"})]
        )
    )

    def broken(self, arguments, seconds_left):
        raise RuntimeError("a bug")

    monkeypatch.setattr(model_tools.ToolBox, "_write_file", broken)
    # When alice sends a message
    response = _send(alice_api, make_item(), "do both")
    # Then the turn says it failed, her message is kept, and the command it ran is in the trail
    assert response.status_code == 201
    assert _stored() == [("user", "do both"), ("agent", FAILED_TURN)]
    assert list(AgentStep.objects.values_list("tool", flat=True)) == ["run_command"]


def test_the_gate_refuses_before_anything_is_stored_and_the_model_is_never_asked(
    alice_api, make_item, model_agent, per_user
):
    # Given alice's cpu limit below one notebook sandbox, in model-agent apps
    per_user(cpu=0.5, apps=model_descriptors())
    # When she sends a message, streamed or not
    plain = _send(alice_api, make_item(), "hello")
    streamed = _send(alice_api, make_item(), "hello", HTTP_ACCEPT="text/event-stream")
    # Then both are 507 as JSON, nothing is stored and the model server heard nothing
    assert (plain.status_code, streamed.status_code) == (507, 507)
    assert json.loads(streamed.content)["error"] == "sandbox_quota_exceeded"
    assert not ItemMessage.objects.exists()
    assert model_agent.chat_requests == []


def test_a_stranger_streaming_into_someone_elses_item_gets_404_and_nothing_is_stored(bob_api, make_item, model_agent):
    # Given alice's notebook
    # When bob sends a streamed message to its chat
    response = _send(bob_api, make_item(created_by="alice"), "$ id", HTTP_ACCEPT="text/event-stream")
    # Then it is 404 as JSON, nothing is stored and no model was asked
    assert (response.status_code, json.loads(response.content)["error"]) == (404, "not_found")
    assert not ItemMessage.objects.exists()
    assert model_agent.chat_requests == []


@pytest.mark.parametrize("content", ["", "   ", None, ["hello"]])
def test_an_empty_streamed_message_is_refused_before_anything_is_stored(alice_api, make_item, model_agent, content):
    # Given alice's notebook
    # When she streams an empty or non-text message
    response = _send(alice_api, make_item(), content, HTTP_ACCEPT="text/event-stream")
    # Then it is 400 empty_message as JSON, nothing is stored and no model was asked
    assert (response.status_code, json.loads(response.content)["error"]) == (400, "empty_message")
    assert not ItemMessage.objects.exists()
    assert not Notification.objects.exists()
    assert model_agent.chat_requests == []


def test_a_model_that_never_stops_writing_is_cut_at_fifty_thousand_characters(
    alice_api, make_item, model_agent, settings
):
    # Given a model that streams well-formed text chunks and never finishes
    settings.WORKSPACE_LLM_TIMEOUT = 30.0
    model_agent.push(Endless("chunks"))
    # When alice sends a message
    response = _send(alice_api, make_item(), "hello")
    # Then the turn ended at 50,000 characters of reply, said so, and stored no more than that
    assert response.status_code == 201
    (role, reply) = _stored()[-1]
    assert role == "agent"
    assert reply.endswith("The reply stops here: it reached 50,000 characters.")
    assert 49_000 <= len(reply) <= 50_000

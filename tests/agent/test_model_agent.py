"""The model agent on an item's chat, against the local OpenAI-compatible test server: the tools it is
given and calls (one, several in one message, streamed), its trail, the reply streamed to the page."""

from __future__ import annotations

import pytest

from tests.fixtures.agent import sse_events
from tests.fixtures.items import item_url
from tests.fixtures.llm import Call, Reply, Stream
from workspace.agent.models import AgentStep, ItemMessage

pytestmark = pytest.mark.django_db


def _send(api, item, content, **extra):
    return api.post(item_url(item, "/messages"), {"content": content}, format="json", **extra)


def test_a_reply_without_tool_calls_is_stored_and_the_model_was_offered_the_item_tools(
    alice_api, make_item, model_agent
):
    # Given a notebook answered by the model agent, whose model replies in plain words
    model_agent.push(Reply("Hello, **Alice**."))
    # When alice says hello
    response = _send(alice_api, make_item(), "hello")
    # Then the reply is stored as the agent's, with no trail
    assert response.status_code == 201
    reply = response.json()["replies"]
    assert [(r["role"], r["content"], r["steps"]) for r in reply] == [("agent", "Hello, **Alice**.", [])]
    # And the model was sent the system's instructions first and her message last, with the item's tools only
    sent = model_agent.chat_requests[0].body
    assert sent["messages"][0]["role"] == "system"
    assert sent["messages"][-1] == {"role": "user", "content": "hello"}
    names = [tool["function"]["name"] for tool in sent["tools"]]
    assert names == ["run_command", "ask_knowledge", "list_files", "read_file", "write_file"]


def test_a_run_command_call_runs_in_the_items_sandbox_and_its_result_goes_back_as_a_tool_message(
    alice_api, make_item, model_agent
):
    # Given a model that asks to run a command, then answers
    model_agent.push(
        Reply(tool_calls=[Call("run_command", {"command": "echo hi > out.txt; cat out.txt"}, id="call_a")]),
        Reply("I wrote out.txt."),
    )
    item = make_item()
    # When alice asks for it
    reply = _send(alice_api, item, "Please write hi to out.txt").json()["replies"][0]
    # Then the command ran in the item's workspace
    assert alice_api.get(item_url(item, "/files/out.txt")).getvalue() == b"hi\n"
    # And the trail holds the call, its exit code and output, under the reply
    assert reply["content"] == "I wrote out.txt."
    step = reply["steps"][0]
    assert (step["kind"], step["tool"], step["ok"], step["arguments"]) == (
        "tool", "run_command", True, {"command": "echo hi > out.txt; cat out.txt"},
    )  # fmt: skip
    assert step["detail"] == {"exit_code": 0, "timed_out": False}
    assert step["output"] == "exit code 0\nhi\n"
    # And the model got the output as the result of that call, never as a system or user message
    follow_up = model_agent.chat_requests[1].messages
    assert follow_up[-2]["tool_calls"][0]["id"] == "call_a"
    assert follow_up[-1] == {"role": "tool", "tool_call_id": "call_a", "content": "exit code 0\nhi\n"}


def test_several_tool_calls_in_one_message_run_in_order_through_the_file_store(alice_api, make_item, model_agent):
    # Given alice's notebook with notes.txt, and a model asking for three file tools in one message
    item = make_item(files={"notes.txt": b"first line\n"})
    model_agent.push(
        Reply(
            tool_calls=[
                Call("list_files", {}),
                Call("read_file", {"path": "notes.txt"}),
                Call("write_file", {"path": "docs/summary.md", "content": "# Summary\nfirst line\n"}),
            ]
        ),
        Reply("Summarised notes.txt into docs/summary.md."),
    )
    # When alice asks for a summary
    reply = _send(alice_api, item, "Summarise notes.txt into docs/summary.md").json()["replies"][0]
    # Then the three calls ran in order, each in the trail
    assert [(s["tool"], s["ok"]) for s in reply["steps"]] == [
        ("list_files", True), ("read_file", True), ("write_file", True),
    ]  # fmt: skip
    assert reply["steps"][0]["output"] == "notes.txt (11 bytes)"
    assert reply["steps"][1]["output"] == "first line\n"
    assert reply["steps"][2]["detail"] == {"path": "docs/summary.md", "bytes": 21}
    # And the file was written through the file store
    assert alice_api.get(item_url(item, "/files/docs/summary.md")).getvalue() == b"# Summary\nfirst line\n"
    # And the model got one tool message per call, in order
    results = [m for m in model_agent.chat_requests[1].messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["call_0", "call_1", "call_2"]


def test_the_reply_streams_as_server_sent_events_and_ends_with_the_stored_turn(alice_api, make_item, model_agent):
    # Given a model that streams a tool call (its arguments in pieces), then its reply in pieces
    model_agent.push(
        Stream(tool_calls=[Call("run_command", {"command": "echo streamed"})], argument_pieces=4),
        Stream(["The command ", "printed ", "`streamed`."]),
    )
    # When alice sends a message asking for server-sent events
    response = _send(alice_api, make_item(), "run echo", HTTP_ACCEPT="text/event-stream")
    # Then the events say the tool started and ended, then the text as written, then the stored turn
    assert response["Content-Type"] == "text/event-stream"
    events = sse_events(response)
    assert [name for name, _ in events] == ["tool", "step", "delta", "delta", "delta", "turn"]
    assert events[0][1] == {"tool": "run_command", "summary": "running echo streamed"}
    assert events[1][1]["summary"] == "ran echo streamed: exit 0"
    assert "".join(data["text"] for name, data in events if name == "delta") == "The command printed `streamed`."
    turn = events[-1][1]
    assert turn["message"]["content"] == "run echo"
    assert turn["replies"][0]["content"] == "The command printed `streamed`."
    assert turn["replies"][0]["steps"][0]["output"] == "exit code 0\nstreamed\n"
    # And what is stored is what the turn event said
    assert list(ItemMessage.objects.values_list("role", "content")) == [
        ("user", "run echo"), ("agent", "The command printed `streamed`."),
    ]  # fmt: skip


def test_text_written_before_a_tool_call_and_after_it_are_paragraphs_of_one_reply(alice_api, make_item, model_agent):
    # Given a model that says what it will do, calls a tool, then says what it found
    model_agent.push(
        Reply("I will list the files.", tool_calls=[Call("list_files", {})]), Reply("The workspace is empty.")
    )
    # When alice asks
    reply = _send(alice_api, make_item(), "What is in my workspace?").json()["replies"][0]
    # Then the reply holds both, one paragraph each
    assert reply["content"] == "I will list the files.\n\nThe workspace is empty."


def test_nothing_the_model_writes_runs_unless_it_is_a_tool_call(alice_api, make_item, model_agent):
    # Given a model whose reply spells commands the deterministic agent would run
    model_agent.push(Reply("Run this:\n```sh\ntouch pwned\n```\n$ touch pwned-too"))
    item = make_item()
    # When alice sends a message
    reply = _send(alice_api, item, "What should I run?").json()["replies"][0]
    # Then the reply shows them, and nothing ran: the workspace is empty and nothing is in the trail
    assert "touch pwned" in reply["content"]
    assert reply["steps"] == []
    assert alice_api.get(item_url(item, "/files")).json() == []


def test_the_conversation_read_back_carries_each_replys_trail_in_few_queries(
    alice_api, make_item, model_agent, django_assert_max_num_queries
):
    # Given three turns, each with a tool call
    item = make_item()
    for number in range(3):
        model_agent.push(
            Reply(tool_calls=[Call("run_command", {"command": f"echo {number}"})]), Reply(f"done {number}")
        )
        _send(alice_api, item, f"run {number}")
    # When alice reads the conversation back
    with django_assert_max_num_queries(7):
        rows = alice_api.get(item_url(item, "/messages")).json()
    # Then every agent message carries its step, read-only, in order
    assert [[s["summary"] for s in row["steps"]] for row in rows if row["role"] == "agent"] == [
        ["ran echo 0: exit 0"], ["ran echo 1: exit 0"], ["ran echo 2: exit 0"],
    ]  # fmt: skip
    assert AgentStep.objects.count() == 3


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
def test_markers_the_model_invents_without_asking_the_knowledge_base_are_dropped(
    alice_api, make_item, model_agent, accept
):
    # Given a model that never asks the knowledge base, yet cites [7], [99] and [1234]
    model_agent.push(Stream(["Restart the worker [7]", " [99], then check the queue [1234]."]))
    # When alice asks, the reply streamed to her page or not
    response = _send(alice_api, make_item(), "How do I unstick the queue?", HTTP_ACCEPT=accept)
    # Then no marker is in the stored reply, nor in any piece her page was shown, and it cites nothing
    if accept == "text/event-stream":
        events = sse_events(response)
        shown = "".join(data["text"] for name, data in events if name == "delta")
        reply = events[-1][1]["replies"][0]
        assert shown == reply["content"]
    else:
        reply = response.json()["replies"][0]
    assert reply["content"] == "Restart the worker, then check the queue."
    assert reply["citations"] == []
    assert ItemMessage.objects.get(role="agent").content == reply["content"]


def test_a_streamed_reply_shows_only_the_markers_naming_a_passage_the_turn_was_given(
    alice_api, make_item, model_agent, handbook
):
    # Given a model that asks the knowledge base, then cites passage [1] and a [9] it was not given
    model_agent.push(
        Stream(tool_calls=[Call("ask_knowledge", {"question": "free sandbox quota capacity"})]),
        Stream(["Close a sandbox on my-resources [1", "]. See also [9", "]."]),
    )
    # When alice asks with the reply streamed
    events = sse_events(_send(alice_api, make_item(), "How do I free quota?", HTTP_ACCEPT="text/event-stream"))
    # Then her page was shown [1] and never [9], and what it was shown is what is stored
    deltas = [data["text"] for name, data in events if name == "delta"]
    assert not any("[9" in delta for delta in deltas)
    reply = events[-1][1]["replies"][0]
    assert "".join(deltas) == reply["content"] == "Close a sandbox on my-resources [1]. See also."
    assert [citation["document_name"] for citation in reply["citations"]] == ["quotas.md"]


# Closing a response ends the request, and with it the database connection: the test runs outside a transaction.
@pytest.mark.django_db(transaction=True)
def test_a_reader_leaving_mid_stream_does_not_cut_the_turn_short(alice_api, make_item, model_agent):
    # Given a model that runs a command, then answers
    model_agent.push(Reply(tool_calls=[Call("run_command", {"command": "echo kept"})]), Reply("Done."))
    # When alice's page reads the first event and goes away
    response = _send(alice_api, make_item(), "run it", HTTP_ACCEPT="text/event-stream")
    next(iter(response.streaming_content))
    response.close()
    # Then the turn still ran to its end and is stored whole, with its trail
    reply = ItemMessage.objects.get(role="agent")
    assert reply.content == "Done."
    assert list(reply.steps.values_list("summary", flat=True)) == ["ran echo kept: exit 0"]


def test_a_turn_against_any_model_server_keeps_the_message_and_stores_a_reply(
    alice_api, make_item, model_apps, any_provider
):
    # Given the model agent on the test server, or on a real one named by WORKSPACE_LLM_TEST_BASE_URL
    item = make_item(files={"hello.txt": b"pong\n"})
    # When alice asks it to read a file
    response = _send(alice_api, item, "What does hello.txt in my workspace say? Use your tools.")
    # Then her message is kept and one agent reply is stored, every step it took a tool of the item
    assert response.status_code == 201
    replies = response.json()["replies"]
    assert [reply["role"] for reply in replies] == ["agent"]
    assert replies[0]["content"]
    assert {step["tool"] for step in replies[0]["steps"]} <= {
        "run_command",
        "ask_knowledge",
        "list_files",
        "read_file",
        "write_file",
        "",
    }


def test_listing_a_folder_lists_what_is_in_it_and_a_missing_folder_is_a_tool_error(alice_api, make_item, model_agent):
    # Given a workspace with a docs folder, and a model listing it and a folder that is not there
    item = make_item(files={"docs/a.md": b"a", "top.txt": b"t"})
    model_agent.push(Reply(tool_calls=[Call("list_files", {"path": "docs"}), Call("list_files", {"path": "nope"})]))
    # When alice asks
    steps = _send(alice_api, item, "what is in docs?").json()["replies"][0]["steps"]
    # Then the first lists docs only, the second is refused
    assert (steps[0]["ok"], steps[0]["output"]) == (True, "docs/a.md (1 bytes)")
    assert (steps[1]["ok"], steps[1]["output"]) == (False, "There is no folder 'nope'.")


def test_a_file_that_is_not_text_is_not_shown_to_the_model(alice_api, make_item, model_agent):
    # Given a workspace with a binary file, and a model reading it
    item = make_item(files={"blob.bin": b"\x00\xff\xfe binary"})
    model_agent.push(Reply(tool_calls=[Call("read_file", {"path": "blob.bin"})]), Reply("It is binary."))
    # When alice asks
    step = _send(alice_api, item, "read blob.bin").json()["replies"][0]["steps"][0]
    # Then the model is told it is no text, and its bytes are not sent
    assert step["output"] == "blob.bin is not UTF-8 text (10 bytes); it is not shown."
    assert step["detail"] == {"path": "blob.bin", "bytes": 10}

"""Chat send: the gate before the message is stored, the swallowed warm-up, and the agent turn."""

from __future__ import annotations

import pytest

from collab.errors import Unavailable
from tests.fixtures.items import item_url
from workspace.agent.models import ItemMessage
from workspace.agent.protocol import AgentReply
from workspace.items import lifecycle

pytestmark = pytest.mark.django_db


def _send(api, item, content):
    return api.post(item_url(item, "/messages"), {"content": content}, format="json")


class EchoAgent:
    """A stand-in for an LLM agent behind the same protocol."""

    def respond(self, turn, tools):
        return [AgentReply(content=f"echo: {turn.content}")]


class BrokenAgent:
    def respond(self, turn, tools):
        raise RuntimeError("model unavailable")


def test_chat_send_stores_the_message_and_the_agents_reply(alice_api, make_item):
    # Given a notebook of alice's
    item = make_item()
    # When she sends a `$ ` command to its chat
    response = _send(alice_api, item, "$ echo hello")
    # Then her message and the agent's one reply come back and both are stored, hers first
    assert response.status_code == 201
    body = response.json()
    assert body["message"]["role"] == "user"
    assert body["message"]["content"] == "$ echo hello"
    assert [reply["role"] for reply in body["replies"]] == ["agent"]
    assert list(ItemMessage.objects.filter(item=item).values_list("role", flat=True)) == ["user", "agent"]


def test_a_dollar_line_runs_in_the_items_sandbox(alice_api, make_item):
    # Given alice's notebook with notes.txt in its workspace
    item = make_item()
    alice_api.put(item_url(item, "/files/notes.txt"), b"x", content_type="application/octet-stream")
    # When she sends `$ ls`
    reply = _send(alice_api, item, "$ ls").json()["replies"][0]["content"]
    # Then the agent's reply is the command and its output as a Markdown code block, then its exit code
    assert reply == "```\n$ ls\nnotes.txt\n```\n[exit 0]"


def test_a_fenced_sh_block_runs_as_one_command(alice_api, make_item):
    # Given alice's notebook
    # When she sends prose around a fenced sh block of three lines
    reply = _send(alice_api, make_item(), "Please run:\n```sh\necho one\necho two >&2\nexit 4\n```").json()
    # Then the block runs as one command: both streams are in the reply, and its exit code
    assert reply["replies"][0]["content"] == "```\n$ echo one\necho two >&2\nexit 4\none\ntwo\n```\n[exit 4]"


@pytest.mark.parametrize("content", ["", "   ", None, 42, ["echo"]])
def test_an_empty_or_non_text_message_is_refused_and_nothing_is_stored(alice_api, make_item, content):
    # Given alice's notebook
    item = make_item()
    # When she sends an empty, blank or non-text content
    response = _send(alice_api, item, content)
    # Then it is 400 empty_message and no message is stored
    assert response.status_code == 400
    assert response.json()["error"] == "empty_message"
    assert not ItemMessage.objects.exists()


def test_a_body_without_content_is_refused(alice_api, make_item):
    # Given alice's notebook
    # When she posts a body with no content at all
    response = alice_api.post(item_url(make_item(), "/messages"), {}, format="json")
    # Then it is 400 and no message is stored
    assert response.status_code == 400
    assert not ItemMessage.objects.exists()


def test_a_quota_refusal_at_the_gate_answers_507_and_stores_nothing(alice_api, make_item, cpu_exhausted):
    # Given alice's cpu limit below one notebook sandbox
    # When she sends a command
    response = _send(alice_api, make_item(), "$ echo never")
    # Then the gate refuses it and nothing is stored
    assert response.status_code == 507
    assert (response.json()["error"], response.json()["dimension"]) == ("sandbox_quota_exceeded", "cpu")
    assert not ItemMessage.objects.exists()


def test_a_pure_chat_turn_is_gated_the_same_way(alice_api, make_item, cpu_exhausted):
    # Given alice's cpu limit below one notebook sandbox
    # When she sends a question that runs nothing
    response = _send(alice_api, make_item(), "What does the handbook say about quotas?")
    # Then the gate refuses it all the same and nothing is stored
    assert response.status_code == 507
    assert not ItemMessage.objects.exists()


def test_the_gate_runs_before_the_user_message_is_stored(alice_api, make_item, monkeypatch):
    # Given the sandbox gate watched for how many messages are stored when it runs
    stored_at_gate = []
    original = lifecycle.sandbox_for_item

    def watching_gate(**kwargs):
        stored_at_gate.append(ItemMessage.objects.count())
        return original(**kwargs)

    monkeypatch.setattr(lifecycle, "sandbox_for_item", watching_gate)
    # When alice sends a message / Then it is accepted, and no message was stored yet when the gate ran
    assert _send(alice_api, make_item(), "hello").status_code == 201
    assert stored_at_gate[0] == 0


def test_a_failing_warm_up_is_swallowed_and_the_turn_goes_on(alice_api, make_item, monkeypatch):
    # Given a sandbox gate that passes, then fails the warm-up after the message is stored
    calls = []
    original = lifecycle.sandbox_for_item

    def gate_then_failing_warm_up(**kwargs):
        calls.append(1)
        if len(calls) == 2:  # the warm-up, right after the message is stored
            raise Unavailable(error="sandbox_host_unavailable", detail="host down")
        return original(**kwargs)

    monkeypatch.setattr(lifecycle, "sandbox_for_item", gate_then_failing_warm_up)
    # When alice sends prose with no command
    response = _send(alice_api, make_item(), "hello there")
    # Then the turn still goes on and the agent answers with its help text
    assert response.status_code == 201
    assert response.json()["replies"][0]["content"].startswith("I can run shell commands")


def test_someone_elses_item_is_404_and_nothing_is_stored(bob_api, make_item):
    # Given an item of alice's
    # When bob sends a command to its chat
    response = _send(bob_api, make_item(created_by="alice"), "$ id")
    # Then it is 404 and nothing is stored
    assert response.status_code == 404
    assert not ItemMessage.objects.exists()


def test_the_conversation_reads_back_oldest_first(alice_api, make_item, django_assert_max_num_queries):
    # Given alice's notebook
    item = make_item()
    # When she sends two commands and reads the conversation back
    _send(alice_api, item, "$ echo a")
    _send(alice_api, item, "$ echo b")
    with django_assert_max_num_queries(6):
        rows = alice_api.get(item_url(item, "/messages")).json()
    # Then it lists her messages and the agent's replies oldest first, the replies by nobody
    assert [(row["role"], row["content"].strip("`\n")[:8]) for row in rows] == [
        ("user", "$ echo a"), ("agent", "$ echo a"), ("user", "$ echo b"), ("agent", "$ echo b"),
    ]  # fmt: skip
    assert rows[1]["created_by"] is None


def test_the_agent_is_pluggable_through_settings(alice_api, make_item, settings):
    # Given the agent setting naming an echo agent
    settings.WORKSPACE_AGENT = "tests.agent.test_chat_send.EchoAgent"
    # When alice sends ping
    reply = _send(alice_api, make_item(), "ping").json()["replies"]
    # Then that agent answers
    assert [r["content"] for r in reply] == ["echo: ping"]


def test_a_broken_agent_keeps_the_message_and_says_the_turn_failed(alice_api, make_item, settings):
    # Given the agent setting naming an agent that raises
    settings.WORKSPACE_AGENT = "tests.agent.test_chat_send.BrokenAgent"
    # When alice sends ping
    response = _send(alice_api, make_item(), "ping")
    # Then the send still succeeds, the reply says the turn failed and her message is kept
    assert response.status_code == 201
    assert response.json()["replies"][0]["content"].startswith("The agent failed")
    assert ItemMessage.objects.filter(role="user", content="ping").exists()


def test_mentions_outside_an_investigation_are_refused_in_the_reply(alice_api, make_item):
    # Given a notebook, which is no investigation
    # When alice's message mentions bob
    reply = _send(alice_api, make_item(), "@mention bob: look").json()["replies"][0]["content"]
    # Then the agent answers that mentions work only inside an investigation
    assert reply == "I could not do that: mentions work inside an investigation"


def test_the_agent_answers_from_the_knowledge_base_with_citations(alice_api, make_item, handbook):
    # Given the operations handbook and alice's notebook
    # When she asks how to free sandbox quota capacity
    reply = _send(alice_api, make_item(), "How do I free sandbox quota capacity?").json()["replies"][0]
    # Then the agent's answer cites quotas.md of the handbook by marker
    assert "[1]" in reply["content"]
    assert reply["citations"][0]["collection_id"] == handbook.id
    assert reply["citations"][0]["document_name"] == "quotas.md"


def test_a_plain_items_answer_writes_no_citation_events(alice_api, make_item, handbook):
    from knowledge.models import CitationEvent

    # Given the operations handbook and alice's notebook
    # When she asks it a question that the agent answers with citations
    _send(alice_api, make_item(), "How do I free sandbox quota capacity?")
    # Then no citation event is recorded: those count KB chats and investigations only
    assert not CitationEvent.objects.exists()

"""The deterministic agent: what it reads out of a message and which tools it calls, in order."""

from __future__ import annotations

from dataclasses import dataclass, field

from knowledge.answers import Answer, Citation
from workspace.agent.deterministic import HELP, DeterministicAgent
from workspace.agent.protocol import AgentTools, AgentTurn, ToolRefused
from workspace.items.sandboxes.base import ExecResult


@dataclass
class FakeTools:
    calls: list[tuple] = field(default_factory=list)
    refuse: bool = False

    def run_command(self, command: str) -> ExecResult:
        self.calls.append(("run", command))
        return ExecResult(exit_code=0, stdout=f"ran {command}\n", stderr="")

    def ask_knowledge(self, question: str) -> Answer:
        self.calls.append(("ask", question))
        citation = Citation(
            marker=1, collection_id="c1", document_id="d1", document_name="a.md", source_chunk_ids=("k",)
        )
        return Answer(text="It says so [1]", citations=(citation,))

    def mention_user(self, user_ids: list[str], note: str = "") -> None:
        if self.refuse:
            raise ToolRefused("Not in the user directory: zed.")
        self.calls.append(("mention", tuple(user_ids), note))

    def set_status(self, status: str) -> None:
        self.calls.append(("status", status))


def _respond(content: str, tools: FakeTools | None = None):
    tools = tools or FakeTools()
    turn = AgentTurn(item_id=1, app_slug="rca", user_id="alice", content=content, in_investigation=True)
    return DeterministicAgent().respond(turn, tools), tools


def test_the_fake_tools_satisfy_the_tools_protocol():
    assert isinstance(FakeTools(), AgentTools)


def test_actions_run_in_the_order_they_are_written():
    _replies, tools = _respond("$ uname\n```bash\nls -la\n```\n@mention bob carol: please look\n@status in_progress")
    assert tools.calls == [
        ("run", "uname"), ("run", "ls -la"), ("mention", ("bob", "carol"), "please look"), ("status", "in_progress"),
    ]  # fmt: skip


def test_a_fence_without_a_shell_language_is_not_run():
    _replies, tools = _respond("```python\nprint(1)\n```")
    assert tools.calls == []


def test_prose_with_a_question_mark_goes_to_the_knowledge_base():
    replies, tools = _respond("$ df -h\nWhy is the disk full?")
    assert tools.calls[-1] == ("ask", "Why is the disk full?")
    assert replies[-1].citations[0]["document_id"] == "d1"


def test_prose_without_a_question_gets_the_help_text_and_no_tool_call():
    replies, tools = _respond("thanks")
    assert (tools.calls, [reply.content for reply in replies]) == ([], [HELP])


def test_a_mention_without_a_note_and_with_at_signs():
    _replies, tools = _respond("@mention @bob, @carol")
    assert tools.calls == [("mention", ("bob", "carol"), "")]


def test_a_refused_tool_call_is_reported_and_the_turn_goes_on():
    replies, tools = _respond("@mention zed\n$ true", FakeTools(refuse=True))
    assert replies[0].content == "I could not do that: Not in the user directory: zed."
    assert tools.calls == [("run", "true")]


def test_command_output_ends_with_the_exit_code():
    replies, _tools = _respond("$ hostname")
    assert replies[0].content == "$ hostname\nran hostname\n[exit 0]"

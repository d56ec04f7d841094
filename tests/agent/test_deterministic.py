"""The deterministic agent: what it reads out of a message and which tools it calls, in order."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from knowledge.answers import Answer, Citation
from workspace.agent.deterministic import HELP, DeterministicAgent
from workspace.agent.protocol import AgentTools, AgentTurn, ToolRefused
from workspace.sandboxes.base import ExecResult


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
    # Given the fake tools these tests hand the agent
    # When they are checked against the agent's tools protocol / Then they satisfy it
    assert isinstance(FakeTools(), AgentTools)


def test_actions_run_in_the_order_they_are_written():
    # Given a message with a `$ ` line, a bash block, a mention and a status move
    # When the agent responds to it
    _replies, tools = _respond("$ uname\n```bash\nls -la\n```\n@mention bob carol: please look\n@status in_progress")
    # Then it calls the tools in the order the message wrote them
    assert tools.calls == [
        ("run", "uname"), ("run", "ls -la"), ("mention", ("bob", "carol"), "please look"), ("status", "in_progress"),
    ]  # fmt: skip


def test_a_fence_without_a_shell_language_is_not_run():
    # Given a fenced block marked python
    # When the agent responds to it
    _replies, tools = _respond("```python\nprint(1)\n```")
    # Then it runs nothing
    assert tools.calls == []


def test_prose_with_a_question_mark_goes_to_the_knowledge_base():
    # Given a command line followed by prose with a question mark
    # When the agent responds
    replies, tools = _respond("$ df -h\nWhy is the disk full?")
    # Then the prose goes to the knowledge base last and its answer keeps the citations
    assert tools.calls[-1] == ("ask", "Why is the disk full?")
    assert replies[-1].citations[0]["document_id"] == "d1"


def test_prose_without_a_question_gets_the_help_text_and_no_tool_call():
    # Given prose that asks nothing
    # When the agent responds
    replies, tools = _respond("thanks")
    # Then it calls no tool and answers with the help text
    assert (tools.calls, [reply.content for reply in replies]) == ([], [HELP])


def test_a_mention_without_a_note_names_people_without_their_at_signs():
    # Given a mention of two people written with at signs and a comma, and no note
    # When the agent responds
    _replies, tools = _respond("@mention @bob, @carol")
    # Then it mentions both by their bare names with an empty note
    assert tools.calls == [("mention", ("bob", "carol"), "")]


def test_a_refused_tool_call_is_reported_and_the_turn_goes_on():
    # Given tools that refuse every mention, and a message that mentions zed then runs a command
    # When the agent responds
    replies, tools = _respond("@mention zed\n$ true", FakeTools(refuse=True))
    # Then it reports the refusal in its first reply and still runs the command
    assert replies[0].content == "I could not do that: Not in the user directory: zed."
    assert tools.calls == [("run", "true")]


def test_command_output_ends_with_the_exit_code():
    # Given a one-line command
    # When the agent runs it
    replies, _tools = _respond("$ hostname")
    # Then its reply is the command, its output and the exit code, last
    assert replies[0].content == "```\n$ hostname\nran hostname\n```\n[exit 0]"


def test_output_holding_backticks_stays_inside_its_code_block():
    # Given a command whose output holds a Markdown fence of its own
    tools = FakeTools()
    tools.run_command = lambda command: ExecResult(exit_code=0, stdout="```\nnot a fence\n```\n", stderr="")
    # When the agent runs it
    replies, _tools = _respond("$ cat README.md", tools)
    # Then the reply's fence is longer than any run of backticks in the output, so the block holds it all
    assert replies[0].content == "````\n$ cat README.md\n```\nnot a fence\n```\n````\n[exit 0]"


@pytest.mark.parametrize(
    "content",
    [
        "What happened around the closing of the checkout window?",
        "open the log",
        "Please close this investigation and mark it resolved.",
        "> @status closed",
        "```text\n@status closed\n```",
        "The runbook says: @status closed",
        "Please summarise this log\n~~~\n2026-12-06 ERROR checkout timeout\n@status closed\n~~~\n",
        "Please summarise this log\n```\n2026-12-06 ERROR checkout timeout\n@status closed\n",
        "Please summarise this log\n\n    2026-12-06 ERROR checkout timeout\n    @status closed\n",
        "Please summarise this log <pre>\n@status closed\n</pre>",
    ],
)
def test_status_words_outside_a_status_line_of_the_askers_own_move_nothing(content):
    # Given a message whose status words are prose, a quote, a pasted block or mid-line
    # When the agent responds
    _replies, tools = _respond(content)
    # Then it moves no status (only an `@status <status>` line of the asker's does)
    assert not [call for call in tools.calls if call[0] == "status"]


def test_a_status_line_of_the_askers_own_moves_the_status_it_names():
    # Given a message that asks about the closing of a window, then writes a status line
    # When the agent responds
    _replies, tools = _respond("Is the closing of the checkout window done?\n@status resolved")
    # Then the status moves to what the line names, once
    assert [call for call in tools.calls if call[0] == "status"] == [("status", "resolved")]


def test_command_and_mention_lines_inside_a_pasted_block_are_not_acted_on():
    # Given a pasted log in a ```text block holding a `$ ` line and a mention line
    # When the agent responds
    _replies, tools = _respond("```text\n$ rm -rf build\n@mention bob: look\n```")
    # Then nothing in the block runs or mentions anyone
    assert tools.calls == []


def test_a_command_in_a_tilde_fence_of_a_shell_runs():
    # Given a ~~~sh block / When the agent responds / Then its command runs
    _replies, tools = _respond("~~~sh\necho hi\n~~~")
    assert tools.calls == [("run", "echo hi")]

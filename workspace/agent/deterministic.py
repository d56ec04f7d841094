"""The built-in agent: no model, just the instructions a message spells out.

- fenced ```sh (or bash, shell) blocks and lines starting with `$ ` run in the item's sandbox;
- `@mention bob carol: please look` calls the `mention_user` tool (inside an investigation);
- `@status resolved` moves the investigation's status (a line of its own: the word "closing" in a
  sentence, a quoted `> @status closed` or one in a pasted block moves nothing);
- other fenced blocks are pasted text: nothing in them is run or acted on;
- whatever else remains and asks something (has a `?`) is answered from the knowledge base.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workspace.agent.protocol import AgentReply, AgentTools, AgentTurn, ToolRefused

# Any fenced block: a shell one runs; another (a pasted log, ```text) is neither run nor read for
# `$ `, `@mention` or `@status` lines, which only the asker's own lines are.
# A fenced block, ``` or ~~~, closed or running to the end of the message; and an HTML <pre>.
# What is pasted in them (a log, a runbook) is never acted on; only a sh/bash/shell fence runs.
_FENCE = re.compile(r"(```|~~~)[ \t]*([\w+-]*)[^\n`~]*\n(.*?)(?:\1|\Z)", re.DOTALL)
_PRE = re.compile(r"<pre\b.*?(?:</pre>|\Z)", re.DOTALL | re.IGNORECASE)
_SHELLS = frozenset({"sh", "bash", "shell"})
# Greedy and unable to fail once it has a user (the lazy `[^:]+?\s*` it replaces backtracked
# quadratically on a long run of spaces); the users are right-stripped where they are read.
_MENTION = re.compile(r"^@mention\s+(?P<users>[^:]+)(?::\s*(?P<note>.*))?$")
_STATUS = re.compile(r"^@status\s+(?P<status>\S+)\s*$")
OUTPUT_LIMIT = 4000
HELP = (
    "I can run shell commands (a ```sh block or a line starting with `$ `), answer questions from the "
    "knowledge base (ask with a `?`), mention colleagues (`@mention bob carol: note`) and, inside an "
    "investigation, move its status (`@status resolved`)."
)


@dataclass(frozen=True)
class _Action:
    kind: str  # "command", "mention", "status"
    text: str
    extra: str = ""


def _parse(content: str) -> tuple[list[_Action], str]:
    """The actions in the order written, and the leftover prose."""
    actions: list[_Action] = []
    prose: list[str] = []
    cursor = 0
    content = _PRE.sub("\n", content)
    for fence in _FENCE.finditer(content):
        _parse_lines(content[cursor : fence.start()], actions, prose)
        if fence.group(2).lower() in _SHELLS and fence.group(3).strip():
            actions.append(_Action("command", fence.group(3).strip()))
        cursor = fence.end()
    _parse_lines(content[cursor:], actions, prose)
    return actions, "\n".join(prose).strip()


def _parse_lines(text: str, actions: list[_Action], prose: list[str]) -> None:
    for raw in text.splitlines():
        line = raw.strip()
        if raw.startswith(("    ", "\t")):
            continue  # an indented code block: pasted, not asked
        if line.startswith("$ ") and line[2:].strip():
            actions.append(_Action("command", line[2:].strip()))
        elif mention := _MENTION.match(line):
            actions.append(_Action("mention", mention.group("users").rstrip(), mention.group("note") or ""))
        elif status := _STATUS.match(line):
            actions.append(_Action("status", status.group("status")))
        elif line:
            prose.append(line)


def fenced(text: str) -> str:
    """`text` as a Markdown code block (replies render as Markdown), whatever backticks it holds."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}\n{body}{fence}"


def _clip(text: str) -> str:
    return text if len(text) <= OUTPUT_LIMIT else text[:OUTPUT_LIMIT] + "\n… (output clipped)"


class DeterministicAgent:
    """Does exactly what the message spells out, in the order written, and reports each step."""

    def respond(self, turn: AgentTurn, tools: AgentTools) -> list[AgentReply]:
        actions, prose = _parse(turn.content)
        replies = [self._act(action, tools) for action in actions]
        if "?" in prose:
            answer = tools.ask_knowledge(prose)
            replies.append(AgentReply(content=answer.text, citations=tuple(c.as_dict() for c in answer.citations)))
        if not replies:
            replies.append(AgentReply(content=HELP))
        return replies

    def _act(self, action: _Action, tools: AgentTools) -> AgentReply:
        try:
            if action.kind == "command":
                result = tools.run_command(action.text)
                output = _clip(result.stdout + result.stderr)
                ending = " (timed out)" if result.timed_out else ""
                block = fenced(f"$ {action.text}\n{output}")
                return AgentReply(content=f"{block}\n[exit {result.exit_code}]{ending}")
            if action.kind == "mention":
                user_ids = [part.lstrip("@") for part in re.split(r"[\s,]+", action.text) if part.strip("@ ")]
                tools.mention_user(user_ids, action.extra)
                return AgentReply(content=f"I mentioned {', '.join(user_ids)}.")
            tools.set_status(action.text)
            return AgentReply(content=f"I moved the status to {action.text}.")
        except ToolRefused as exc:
            return AgentReply(content=f"I could not do that: {exc}")

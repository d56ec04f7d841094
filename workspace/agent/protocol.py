"""What an agent is and what it may use; an LLM agent plugs in behind the same two protocols."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from django.conf import settings
from django.utils.module_loading import import_string

from knowledge.answers import Answer
from workspace.items.sandboxes.base import ExecResult


class ToolRefused(Exception):
    """A tool call the service refused (bad input, unknown user, not inside an investigation...).

    The agent reports it in its reply; the turn itself goes on.
    """


@dataclass(frozen=True)
class AgentTurn:
    """One user message the agent answers; `user_id` is the asker, captured at the HTTP boundary."""

    item_id: int
    app_slug: str
    user_id: str
    content: str
    in_investigation: bool


@dataclass(frozen=True)
class AgentReply:
    """One message the agent leaves in the conversation (stored with role `agent`)."""

    content: str
    citations: tuple[dict[str, Any], ...] = field(default_factory=tuple)


@runtime_checkable
class AgentTools(Protocol):
    """The tools of one turn, already bound to the item, the asker and (maybe) the investigation."""

    def run_command(self, command: str) -> ExecResult: ...

    def ask_knowledge(self, question: str) -> Answer: ...

    def mention_user(self, user_ids: list[str], note: str = "") -> None: ...

    def set_status(self, status: str) -> None: ...


@runtime_checkable
class Agent(Protocol):
    def respond(self, turn: AgentTurn, tools: AgentTools) -> list[AgentReply]: ...


def get_agent() -> Agent:
    """The agent named by `WORKSPACE_AGENT` (a dotted path), else the deterministic built-in."""
    return import_string(settings.WORKSPACE_AGENT)()

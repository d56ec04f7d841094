"""What an agent is and what it may use: the deterministic built-in and the model agent (`model.py`)
plug in behind the same protocols."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from django.conf import settings
from django.utils.module_loading import import_string

from knowledge.answers import Answer, Answerer, Citation, Restart
from workspace.sandboxes.base import ExecResult
from workspace.sandboxes.filestore import FileChange, FileEntry


class ToolRefused(Exception):
    """A tool call the service refused (bad input, unknown user, not inside an investigation...).

    The agent reports it in its reply; the turn itself goes on.
    """


@dataclass(frozen=True)
class PastMessage:
    """An earlier message of the conversation, as the model agent is shown it."""

    role: str  # user, agent, mention, system
    author: str  # the person's user id; "" for the agent
    content: str


@dataclass(frozen=True)
class AgentTurn:
    """One user message the agent answers; `user_id` is the asker, captured at the HTTP boundary.
    `history` is the conversation before it, oldest first (the model agent reads it)."""

    item_id: int
    app_slug: str
    user_id: str
    content: str
    in_investigation: bool
    history: tuple[PastMessage, ...] = ()


@dataclass(frozen=True)
class TrailStep:
    """One step of a turn's visible trail: a tool call and what came of it, or a note on the turn.

    `output` is what the model was given back; `detail` what the page shows beside it (exit code,
    path and size, who was mentioned).
    """

    kind: str  # "tool" or "note"
    summary: str
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    ok: bool = True
    output: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolStarted:
    """A tool call begins (the page shows it while a command runs)."""

    tool: str
    summary: str


@dataclass(frozen=True)
class AgentReply:
    """One message the agent leaves in the conversation (stored with role `agent`), with its trail."""

    content: str
    citations: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    steps: tuple[TrailStep, ...] = ()


# What a streaming agent yields: pieces of its reply as written, a Restart when what was shown is
# withdrawn, tool calls as they start and end, and its replies (the last event is one).
AgentEvent = str | Restart | ToolStarted | TrailStep | AgentReply


@dataclass(frozen=True)
class FileText:
    """A workspace file read for the agent: its text up to the limit asked for."""

    path: str
    text: str
    size: int
    truncated: bool
    binary: bool


@runtime_checkable
class AgentTools(Protocol):
    """The tools of one turn, already bound to the item, the asker and (maybe) the investigation."""

    def run_command(self, command: str) -> ExecResult: ...

    def ask_knowledge(self, question: str) -> Answer: ...

    def mention_user(self, user_ids: list[str], note: str = "") -> None: ...

    def set_status(self, status: str) -> None: ...


@runtime_checkable
class ModelAgentTools(Protocol):
    """`AgentTools` plus the item's workspace files, each through the file store's services and
    disk checks; a command bounded by what is left of the turn; questions answered by the given
    answerer, their citations recorded only for what the reply keeps (`cite`)."""

    in_investigation: bool

    def run_command(self, command: str, timeout: float | None = None) -> ExecResult: ...

    def ask_knowledge(self, question: str, *, answerer: Answerer | None = None, record: bool = True) -> Answer: ...

    def cite(self, citations: Sequence[Citation]) -> None: ...

    def mention_user(self, user_ids: list[str], note: str = "") -> None: ...

    def set_status(self, status: str) -> None: ...

    def list_files(self, path: str = "") -> list[FileEntry]: ...

    def read_file(self, path: str, *, limit: int) -> FileText: ...

    def write_file(self, path: str, content: str) -> FileChange: ...


@runtime_checkable
class Agent(Protocol):
    def respond(self, turn: AgentTurn, tools: AgentTools) -> list[AgentReply]: ...


def get_agent() -> Agent:
    """The agent named by `WORKSPACE_AGENT` (a dotted path), else the deterministic built-in."""
    return import_string(settings.WORKSPACE_AGENT)()

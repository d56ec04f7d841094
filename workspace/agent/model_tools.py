"""The model agent's tools: their JSON-schema definitions, the checks of what the model asks, and
each call made through the turn's tools (the same services as a person's action) into a trail step
and the text the model is given back.

A call the model gets wrong (arguments that are not JSON, of the wrong shape, a tool it was not
given) is answered as a tool error, and so is a refusal of the service: the model reads it and the
turn goes on. Mentions and status moves also need the asker's own message to name the person, or
to ask for the status in so many words (`status_asks.py`): the model may act on what it reads, but
only the asker decides whom to notify and where the investigation stands.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from collab.identity import get_user_directory
from knowledge.answers import NOTHING_FOUND, Answer, Citation, Passage, best_sentences
from knowledge.llm import ToolCall
from knowledge.model_answers import MarkerCheck
from knowledge.search import search_terms
from workspace.agent.messages import storable
from workspace.agent.protocol import AgentTurn, ModelAgentTools, ToolRefused, ToolStarted, TrailStep
from workspace.agent.status_asks import status_asked

# Passages one knowledge-base question gives the model, each cut to this many characters.
TOOL_PASSAGES = 5
PASSAGE_CHARS = 1500
_STRING = {"type": "string"}
# People one mention_user call may name: each is looked for in the asker's message.
MENTIONED_AT_ONCE = 20
_SOURCE_MARKER = re.compile(r"\[(\d{1,4})\]")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...]
    investigation_only: bool = False

    def definition(self) -> dict[str, Any]:
        """The function definition sent to the model (OpenAI `tools` format)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": self.properties,
                    "required": list(self.required),
                    "additionalProperties": False,
                },
            },
        }


SPECS = (
    ToolSpec(
        "run_command",
        "Run a shell command in this item's sandbox (Linux, the workspace at /workspace, no network). "
        "Returns the exit code and the output.",
        {"command": {**_STRING, "description": "The command line, run by sh."}},
        ("command",),
    ),
    ToolSpec(
        "ask_knowledge",
        "Search the team's knowledge base. Returns numbered passages; cite them in your reply as [n].",
        {"question": {**_STRING, "description": "What to look for, in a few words or a question."}},
        ("question",),
    ),
    ToolSpec(
        "list_files",
        "List the files and folders of this item's workspace, or of one folder in it.",
        {"path": {**_STRING, "description": "A folder relative to the workspace; empty for all of it."}},
        (),
    ),
    ToolSpec(
        "read_file",
        "Read a text file of this item's workspace.",
        {"path": {**_STRING, "description": "The file's path relative to the workspace."}},
        ("path",),
    ),
    ToolSpec(
        "write_file",
        "Write a text file in this item's workspace, replacing it if it exists.",
        {
            "path": {**_STRING, "description": "The file's path relative to the workspace."},
            "content": {**_STRING, "description": "The whole new content of the file."},
        },
        ("path", "content"),
    ),
    ToolSpec(
        "mention_user",
        "Mention colleagues in this investigation: each gets a notification. Only people the asker named.",
        {
            "user_ids": {
                "type": "array",
                "items": _STRING,
                "minItems": 1,
                "maxItems": MENTIONED_AT_ONCE,
                "description": "Their user ids.",
            },
            "note": {**_STRING, "description": "What they should look at."},
        },
        ("user_ids",),
        investigation_only=True,
    ),
    ToolSpec(
        "set_status",
        "Move this investigation's status, only when the asker's own message asks for that status.",
        {"status": {"type": "string", "enum": ["open", "in_progress", "resolved", "closed"]}},
        ("status",),
        investigation_only=True,
    ),
)


def tools_for(*, in_investigation: bool) -> list[ToolSpec]:
    return [spec for spec in SPECS if in_investigation or not spec.investigation_only]


class BadCall(Exception):
    """What the model asked cannot be called; the message goes back to it as the tool's error."""


def _arguments(spec: ToolSpec, raw: str) -> dict[str, Any]:
    """The call's arguments, checked against the tool's schema."""
    try:
        arguments = json.loads(raw or "{}")
    except ValueError as exc:
        raise BadCall(f"the arguments are not valid JSON ({exc.msg} at character {exc.pos})") from exc
    if not isinstance(arguments, dict):
        raise BadCall("the arguments must be a JSON object")
    arguments = storable(arguments)  # no NUL reaches a service: PostgreSQL stores none
    if unknown := sorted(set(arguments) - set(spec.properties)):
        raise BadCall(f"{spec.name} takes no argument {unknown[0]!r} (it takes {', '.join(spec.properties)})")
    if missing := [name for name in spec.required if name not in arguments]:
        raise BadCall(f"{spec.name} needs the argument {missing[0]!r}")
    for name, value in arguments.items():
        schema = spec.properties[name]
        if schema["type"] == "string" and not isinstance(value, str):
            raise BadCall(f"{name!r} must be a string")
        if "enum" in schema and value not in schema["enum"]:
            raise BadCall(f"{name!r} must be one of {', '.join(schema['enum'])}")
        if schema["type"] == "array" and (
            not isinstance(value, list) or not value or not all(isinstance(part, str) for part in value)
        ):
            raise BadCall(f"{name!r} must be a non-empty list of strings")
        if schema["type"] == "array" and len(value) > schema.get("maxItems", len(value)):
            raise BadCall(f"{name!r} takes at most {schema['maxItems']} entries")
    return arguments


def one_line(text: str, limit: int = 290) -> str:
    """A trail step's summary: one line of at most `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def clipped(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying so; NUL characters (no database stores them) go."""
    text = text.replace("\x00", "\ufffd")
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[cut: {len(text) - limit} more characters not shown]"


@dataclass(frozen=True)
class Outcome:
    """One call done: its trail step, and the text the model is given back."""

    step: TrailStep
    result: str


class PassagesForModel:
    """An answerer that hands the model the passages themselves, numbered from `first_marker` so
    the markers of every question in a turn are distinct; the model writes the answer."""

    def __init__(self, first_marker: int) -> None:
        self.first_marker = first_marker

    def answer(self, *, question: str, passages: Sequence[Passage]) -> Answer:
        chosen = list(passages)[:TOOL_PASSAGES]
        if not chosen:
            return Answer(text=NOTHING_FOUND, citations=())
        terms = search_terms(question)
        citations = tuple(
            Citation(
                marker=self.first_marker + index,
                collection_id=passage.collection_id,
                document_id=passage.document_id,
                document_name=passage.document_name,
                source_chunk_ids=passage.chunk_ids,
                quote=best_sentences(passage.text, terms),
            )
            for index, passage in enumerate(chosen)
        )
        text = "\n\n".join(
            f"[{citation.marker}] from {citation.document_name}:\n"
            + _SOURCE_MARKER.sub(r"(\1)", passage.text[:PASSAGE_CHARS])
            for citation, passage in zip(citations, chosen, strict=True)
        )
        return Answer(text=text, citations=citations)


class ToolBox:
    """The model's tools for one turn: definitions to send, and calls to make."""

    def __init__(self, tools: ModelAgentTools, turn: AgentTurn, *, output_chars: int) -> None:
        self.tools = tools
        self.turn = turn
        self.output_chars = output_chars
        self.specs = {spec.name: spec for spec in tools_for(in_investigation=turn.in_investigation)}
        self.citations: list[Citation] = []

    def definitions(self) -> list[dict[str, Any]]:
        return [spec.definition() for spec in self.specs.values()]

    def started(self, call: ToolCall) -> ToolStarted:
        try:
            command = json.loads(call.arguments).get("command")
        except (ValueError, AttributeError):
            command = None
        shown = f"running {one_line(command, 200)}" if isinstance(command, str) else f"calling {call.name}"
        return ToolStarted(tool=call.name, summary=shown)

    def call(self, call: ToolCall, *, seconds_left: float) -> Outcome:
        """Makes the call; whatever goes wrong comes back as a tool error, never as an exception."""
        spec = self.specs.get(call.name)
        arguments: dict[str, Any] = {}
        try:
            if spec is None:
                raise BadCall(f"there is no tool {call.name!r}; the tools are {', '.join(self.specs)}")
            arguments = _arguments(spec, call.arguments)
            return getattr(self, f"_{spec.name}")(arguments, seconds_left)
        except (BadCall, ToolRefused) as exc:
            reason = str(exc)
            return Outcome(
                step=TrailStep(
                    kind="tool",
                    tool=call.name[:40],
                    arguments=self._shown(arguments) if arguments else {"raw": clipped(call.arguments, 500)},
                    ok=False,
                    summary=one_line(f"{call.name or 'a tool'} refused: {reason}"),
                    output=clipped(reason, self.output_chars),
                ),
                result=f"Error: {reason}",
            )

    def _shown(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments as the trail keeps them: long strings (a file's content) cut."""
        return {
            name: clipped(value, self.output_chars) if isinstance(value, str) else value
            for name, value in arguments.items()
        }

    def _done(self, name: str, arguments: dict[str, Any], summary: str, result: str, **detail: Any) -> Outcome:
        result = clipped(result, self.output_chars)
        step = TrailStep(
            kind="tool",
            tool=name,
            arguments=self._shown(arguments),
            summary=one_line(summary),
            output=result,
            detail=detail,
        )
        return Outcome(step=step, result=result)

    def _run_command(self, arguments: dict[str, Any], seconds_left: float) -> Outcome:
        command = arguments["command"]
        result = self.tools.run_command(command, timeout=max(1.0, seconds_left))
        ending = " (stopped: it ran out of time)" if result.timed_out else ""
        output = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "")
        return self._done(
            "run_command",
            arguments,
            f"ran {one_line(command, 200)}: exit {result.exit_code}{ending}",
            f"exit code {result.exit_code}{ending}\n{output}",
            exit_code=result.exit_code,
            timed_out=result.timed_out,
        )

    def _ask_knowledge(self, arguments: dict[str, Any], seconds_left: float) -> Outcome:
        question = arguments["question"]
        answer = self.tools.ask_knowledge(
            question, answerer=PassagesForModel(first_marker=len(self.citations) + 1), record=False
        )
        self.citations.extend(answer.citations)
        found = len(answer.citations)
        return self._done(
            "ask_knowledge",
            arguments,
            f"asked the knowledge base: {found} passage{'' if found == 1 else 's'} found",
            answer.text,
            passages=[citation.document_name for citation in answer.citations],
        )

    def _list_files(self, arguments: dict[str, Any], seconds_left: float) -> Outcome:
        entries = self.tools.list_files(arguments.get("path", ""))
        lines = [f"{entry.path}/" if entry.is_dir else f"{entry.path} ({entry.size} bytes)" for entry in entries]
        where = arguments.get("path") or "the workspace"
        return self._done(
            "list_files",
            arguments,
            f"listed {where}: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}",
            "\n".join(lines) or "(empty)",
            count=len(entries),
        )

    def _read_file(self, arguments: dict[str, Any], seconds_left: float) -> Outcome:
        read = self.tools.read_file(arguments["path"], limit=self.output_chars)
        if read.binary:
            text = f"{read.path} is not UTF-8 text ({read.size} bytes); it is not shown."
        elif read.truncated:
            text = f"{read.text}\n[cut: the file has {read.size} bytes]"
        else:
            text = read.text
        return self._done(
            "read_file", arguments, f"read {read.path} ({read.size} bytes)", text, path=read.path, bytes=read.size
        )

    def _write_file(self, arguments: dict[str, Any], seconds_left: float) -> Outcome:
        change = self.tools.write_file(arguments["path"], arguments["content"])
        return self._done(
            "write_file",
            arguments,
            f"wrote {change.path} ({change.new_size} bytes)",
            f"Wrote {change.path}: {change.new_size} bytes (it had {change.old_size}).",
            path=change.path,
            bytes=change.new_size,
        )

    def _mention_user(self, arguments: dict[str, Any], seconds_left: float) -> Outcome:
        user_ids = list(dict.fromkeys(part.strip().lstrip("@") for part in arguments["user_ids"]))
        unasked = [user_id for user_id in user_ids if not _named(self.turn.content, user_id)]
        if unasked:
            raise ToolRefused(
                f"{', '.join(unasked)} {'is' if len(unasked) == 1 else 'are'} not named in the asker's message; "
                "mention only the people the asker names"
            )
        note = arguments.get("note", "")
        self.tools.mention_user(user_ids, note)
        return self._done(
            "mention_user",
            arguments,
            f"mentioned {', '.join(user_ids)}",
            f"Mentioned {', '.join(user_ids)}; each was notified.",
            user_ids=user_ids,
        )

    def _set_status(self, arguments: dict[str, Any], seconds_left: float) -> Outcome:
        status = arguments["status"]
        if not status_asked(self.turn.content, status):
            raise ToolRefused(
                f"the asker's message does not ask for the status {status}; move it only when the asker asks "
                f'in so many words (e.g. "set the status to {status.replace("_", " ")}")'
            )
        self.tools.set_status(status)
        return self._done("set_status", arguments, f"moved the status to {status}", f"The status is now {status}.")

    def cited(self, text: str) -> tuple[str, tuple[Citation, ...]]:
        """The reply with its markers checked against the passages of the turn (a marker naming
        none dropped, every one when the turn asked the knowledge base nothing; the rest
        renumbered in order of use), and the citations it keeps."""
        check = MarkerCheck(len(self.citations))
        checked = check.checked(text).strip()
        kept = tuple(
            replace(self.citations[number - 1], marker=marker)
            for number, marker in sorted(check.order.items(), key=lambda pair: pair[1])
        )
        return checked, kept


def _named(message: str, user_id: str) -> bool:
    """Whether the asker's message names the person: their id as a word (`@bob` or `bob`) or their name."""
    if not user_id:
        return False
    if re.search(rf"(?<![\w.-]){re.escape(user_id)}(?![\w-])", message, re.IGNORECASE):
        return True
    user = get_user_directory().get(user_id)
    name = user.name.strip() if user else ""
    # As whole words: a person named "Al" is not named by "Also" or "vocal".
    return bool(name) and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", message, re.IGNORECASE) is not None

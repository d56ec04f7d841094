"""The tools of one agent turn, bound to the item, the asker and the item's room (an investigation).

Each goes through the service a person's action goes through (exec with its quota gate, the file
store with its disk checks and path rules, the investigation's mention and status services), so
an agent can do nothing in the item the asker could not do there themselves.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from collab.errors import DomainError
from knowledge.answers import Answer, Answerer, Citation, answer_question
from knowledge.models import CitationEvent, Collection
from knowledge.services import record_citations
from workspace.agent.protocol import FileText, ToolRefused
from workspace.agent.rooms import ConversationRoom
from workspace.items import services as item_services
from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import Item
from workspace.items.selectors import item_file_path, item_files
from workspace.items.workspaces import item_workspace_root
from workspace.sandboxes.base import ExecResult
from workspace.sandboxes.filestore import FileChange, FileEntry, open_read, read_file

# A folder listing the model is given; the file list of the item page stops at 500 too.
LISTED_FILES = 500


def _refused(exc: DomainError) -> ToolRefused:
    return ToolRefused(str(exc.detail))


@dataclass
class ItemAgentTools:
    """`message_id` is the user message that started the turn; citation events hang off it."""

    item: Item
    app: AppDescriptor
    user_id: str
    message_id: int
    room: ConversationRoom | None
    citations_recorded: int = 0
    _questions: int = field(default=0, repr=False)

    @property
    def in_investigation(self) -> bool:
        return self.room is not None

    def run_command(self, command: str, timeout: float | None = None) -> ExecResult:
        """Through the exec service, quota gate included; `timeout` at most the deployment's."""
        configured = get_config().sandbox.exec_timeout
        seconds = configured if timeout is None else min(timeout, configured)
        try:
            # The turn holds the person's command slot (chat_send), so the command takes none of its own.
            outcome = item_services.item_exec(
                item=self.item, app=self.app, command=command, actor=None, timeout=seconds
            )
            return outcome.result
        except DomainError as exc:
            raise _refused(exc) from exc

    def ask_knowledge(self, question: str, *, answerer: Answerer | None = None, record: bool = True) -> Answer:
        """Answers from every collection; inside an investigation the citations become `rca` events
        (unless `record` is off: the model agent records only what its reply cites, see `cite`)."""
        self._questions += 1
        # One key per question of the turn, so two questions never share a (message, marker) pair.
        event_message_id = f"rca-{self.message_id}-{self._questions}"
        collection_ids = list(Collection.objects.order_by("pk").values_list("pk", flat=True))
        return answer_question(
            question=question,
            collection_ids=collection_ids,
            on_citations=(lambda citations: self._record(citations, event_message_id)) if record else None,
            answerer=answerer,
        )

    def cite(self, citations: Sequence[Citation]) -> None:
        """Records the markers a model reply keeps, once for the turn (a replay counts nothing)."""
        self._record(citations, f"rca-{self.message_id}-model")

    def _record(self, citations: Sequence[Citation], event_message_id: str) -> None:
        if not self.in_investigation:
            return  # citation events exist for KB chats and investigations only (spec "Events" 2)
        self.citations_recorded += record_citations(
            citations=citations,
            origin_kind=CitationEvent.OriginKind.RCA,
            origin_id=str(self.item.pk),
            cited_by=self.user_id,
            message_id=event_message_id,
        )

    def mention_user(self, user_ids: list[str], note: str = "") -> None:
        if self.room is None:
            raise ToolRefused("mentions work inside an investigation")
        try:
            self.room.mention(item_id=self.item.pk, user_ids=user_ids, note=note, asked_by=self.user_id)
        except DomainError as exc:
            raise _refused(exc) from exc

    def set_status(self, status: str) -> None:
        if self.room is None:
            raise ToolRefused("only an investigation has a status")
        try:
            self.room.set_status(item_id=self.item.pk, status=status, asked_by=self.user_id)
        except DomainError as exc:
            raise _refused(exc) from exc

    def list_files(self, path: str = "") -> list[FileEntry]:
        """The files and folders under `path` (the whole workspace when blank), first LISTED_FILES."""
        try:
            folder = item_file_path(self.item, path) if path.strip() else ""
        except DomainError as exc:
            raise _refused(exc) from exc
        entries = item_files(self.item)
        if folder in ("", "."):
            return entries[:LISTED_FILES]
        inside = [entry for entry in entries if entry.path.startswith(folder + "/")]
        if not inside and not any(entry.path == folder and entry.is_dir for entry in entries):
            raise ToolRefused(f"There is no folder {path!r}.")
        return inside[:LISTED_FILES]

    def read_file(self, path: str, *, limit: int) -> FileText:
        """At most `limit` characters of a workspace file, never reading far past them (sandbox
        code may be growing it); a file that is not UTF-8 text comes back as binary, unread."""
        root = item_workspace_root(self.item)
        try:
            named = item_file_path(self.item, path)
            with open_read(root, read_file(root, named)) as handle:
                size = os.fstat(handle.fileno()).st_size
                data = handle.read(limit * 4 + 4)  # a UTF-8 character is at most four bytes
        except DomainError as exc:
            raise _refused(exc) from exc
        try:
            # Not final: a character cut at the end of what was read is dropped, not an error.
            text = codecs.getincrementaldecoder("utf-8")().decode(data, final=len(data) >= size)
        except UnicodeDecodeError:
            text = None
        if text is None or "\x00" in text:
            return FileText(path=named, text="", size=max(size, len(data)), truncated=False, binary=True)
        truncated = len(text) > limit or len(data) < size
        return FileText(path=named, text=text[:limit], size=max(size, len(data)), truncated=truncated, binary=False)

    def write_file(self, path: str, content: str) -> FileChange:
        """Through the file store's write, with its path rules and disk checks (507 refused)."""
        try:
            return item_services.file_write(item=self.item, path=path, chunks=[content.encode("utf-8")])
        except DomainError as exc:
            raise _refused(exc) from exc

"""The tools of one agent turn, bound to the item, the asker and the item's room (an investigation)."""

from __future__ import annotations

from dataclasses import dataclass, field

from collab.errors import ApiError
from knowledge.answers import Answer, Citation, answer_question
from knowledge.models import CitationEvent, Collection
from knowledge.services import record_citations
from workspace.agent.protocol import ToolRefused
from workspace.agent.rooms import ConversationRoom
from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import Item
from workspace.items.sandboxes import lifecycle
from workspace.items.sandboxes.base import CommandInvalid, ExecResult, validate_command


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

    def run_command(self, command: str) -> ExecResult:
        try:
            valid = validate_command(command)
            outcome = lifecycle.sandbox_exec(
                item=self.item, app=self.app, command=valid, timeout=get_config().sandbox.exec_timeout
            )
        except CommandInvalid as exc:
            raise ToolRefused(str(exc)) from exc
        except ApiError as exc:
            raise ToolRefused(str(exc.detail)) from exc
        return outcome.result

    def ask_knowledge(self, question: str) -> Answer:
        """Answers from every collection; inside an investigation the citations become `rca` events."""
        self._questions += 1
        # One key per question of the turn, so two questions never share a (message, marker) pair.
        event_message_id = f"rca-{self.message_id}-{self._questions}"
        collection_ids = list(Collection.objects.order_by("pk").values_list("pk", flat=True))

        def on_citations(citations: list[Citation]) -> None:
            if not self.in_investigation:
                return  # citation events exist for KB chats and investigations only (spec "Events" 2)
            self.citations_recorded += record_citations(
                citations=citations,
                origin_kind=CitationEvent.OriginKind.RCA,
                origin_id=str(self.item.pk),
                cited_by=self.user_id,
                message_id=event_message_id,
            )

        return answer_question(question=question, collection_ids=collection_ids, on_citations=on_citations)

    def mention_user(self, user_ids: list[str], note: str = "") -> None:
        if self.room is None:
            raise ToolRefused("mentions work inside an investigation")
        try:
            self.room.mention(item_id=self.item.pk, user_ids=user_ids, note=note)
        except ApiError as exc:
            raise ToolRefused(str(exc.detail)) from exc

    def set_status(self, status: str) -> None:
        if self.room is None:
            raise ToolRefused("only an investigation has a status")
        try:
            self.room.set_status(item_id=self.item.pk, status=status)
        except ApiError as exc:
            raise ToolRefused(str(exc.detail)) from exc

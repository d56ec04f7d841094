"""Reads of investigations: the caller's list, and one investigation with its conversation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Prefetch

from collab.actor import Actor
from workspace.agent.models import ItemMessage
from workspace.agent.selectors import messages_of_item
from workspace.investigations.access import investigation_scope
from workspace.investigations.models import Investigation, InvestigationMember

LIST_LIMIT = 200
STATUS_ORDER = [choice.value for choice in Investigation.Status]


def investigations_for_user(*, actor: Actor, limit: int = LIST_LIMIT) -> list[Investigation]:
    """Where the caller is the creator or a member; newest first; two queries whatever the size."""
    rows = (
        Investigation.objects.filter(investigation_scope(actor=actor))
        .select_related("item")
        .prefetch_related(Prefetch("members", queryset=InvestigationMember.objects.order_by("user_id")))
        .order_by("-pk")
    )
    return list(rows[:limit])


@dataclass(frozen=True)
class InvestigationDetail:
    """An investigation with its conversation; it reads as the investigation otherwise, so the
    investigation's output serializer renders it as it is."""

    investigation: Investigation
    messages: list[ItemMessage]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.investigation, name)


def investigation_detail(investigation: Investigation) -> InvestigationDetail:
    return InvestigationDetail(investigation=investigation, messages=messages_of_item(investigation.pk))

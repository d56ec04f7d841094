"""Reads of investigations: the caller's list, and one investigation with its conversation."""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, Prefetch, Q

from collab.clock import epoch_ms
from workspace.agent.selectors import message_as_dict, messages_of_item
from workspace.investigations.models import Investigation, InvestigationMember

LIST_LIMIT = 200
STATUS_ORDER = [choice.value for choice in Investigation.Status]


def investigations_for_user(*, user_id: str, limit: int = LIST_LIMIT) -> list[Investigation]:
    """Where the caller is the owner (creator) or a member; newest first; two queries whatever the size."""
    member = InvestigationMember.objects.filter(investigation=OuterRef("pk"), user_id=user_id)
    rows = (
        Investigation.objects.filter(Q(item__created_by=user_id) | Q(Exists(member)))
        .select_related("item")
        .prefetch_related(Prefetch("members", queryset=InvestigationMember.objects.order_by("user_id")))
        .order_by("-pk")
    )
    return list(rows[:limit])


def member_ids(investigation: Investigation) -> list[str]:
    if investigation._state.adding:
        return []  # an rca item read before its first write: no row, so no members yet
    return [member.user_id for member in investigation.members.all()]


def investigation_as_dict(investigation: Investigation, *, with_messages: bool = False) -> dict[str, Any]:
    item = investigation.item
    row: dict[str, Any] = {
        "id": investigation.pk,
        "title": item.title,
        "status": investigation.status,
        "owner": item.created_by,
        "members": member_ids(investigation),
        "item_url": f"/a/{item.app_slug}/items/{item.pk}",
        "created_at": epoch_ms(investigation.created_at),
        "updated_at": epoch_ms(max(investigation.updated_at, item.updated_at)),
    }
    if with_messages:
        row["messages"] = [message_as_dict(message) for message in messages_of_item(item.pk)]
    return row

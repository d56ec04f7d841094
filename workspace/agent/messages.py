"""The one write every conversation message goes through (user, agent, mention, system)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from workspace.agent.models import ItemMessage
from workspace.items.models import Item


@transaction.atomic
def message_append(
    *,
    item: Item,
    role: str,
    content: str,
    user_id: str | None,
    mentions: Sequence[str] = (),
    citations: Sequence[dict[str, Any]] = (),
) -> ItemMessage:
    """One message of the item's conversation; `user_id` None marks the agent as its author."""
    message = ItemMessage(item=item, role=role, content=content, mentions=list(mentions), citations=list(citations))
    message.stamp_created(user_id)
    message.save(force_insert=True)
    return message

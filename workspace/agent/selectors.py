"""Reads of an item's conversation."""

from __future__ import annotations

from typing import Any

from collab.clock import epoch_ms
from workspace.agent.models import ItemMessage

MESSAGES_LIMIT = 500


def messages_of_item(item_id: int, *, limit: int = MESSAGES_LIMIT) -> list[ItemMessage]:
    """The newest `limit` messages, oldest first (the order a conversation reads)."""
    newest = list(ItemMessage.objects.filter(item_id=item_id).order_by("-id")[:limit])
    newest.reverse()
    return newest


def message_as_dict(message: ItemMessage) -> dict[str, Any]:
    return {
        "id": message.pk,
        "role": message.role,
        "content": message.content,
        "mentions": list(message.mentions or []),
        "citations": list(message.citations or []),
        "created_by": message.created_by or None,
        "created_at": epoch_ms(message.created_at),
    }

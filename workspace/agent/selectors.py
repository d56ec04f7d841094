"""Reads of an item's conversation."""

from __future__ import annotations

from workspace.agent.models import ItemMessage

MESSAGES_LIMIT = 500


def messages_of_item(item_id: int, *, limit: int = MESSAGES_LIMIT) -> list[ItemMessage]:
    """The newest `limit` messages, oldest first (the order a conversation reads)."""
    newest = list(ItemMessage.objects.filter(item_id=item_id).order_by("-id")[:limit])
    newest.reverse()
    return newest

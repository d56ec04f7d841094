"""Reads of an item's conversation."""

from __future__ import annotations

from knowledge.selectors import TranscriptEntry, chat_transcript
from workspace.agent.models import ItemMessage

MESSAGES_LIMIT = 500


def messages_of_item(item_id: int, *, limit: int = MESSAGES_LIMIT) -> list[ItemMessage]:
    """The newest `limit` messages, oldest first (the order a conversation reads), each with its
    trail (one more query for all of them)."""
    newest = list(ItemMessage.objects.filter(item_id=item_id).order_by("-id").prefetch_related("steps")[:limit])
    newest.reverse()
    return newest


def conversation_of_item(item_id: int, *, limit: int = MESSAGES_LIMIT) -> list[TranscriptEntry]:
    """The messages as a page shows them: each with the sources its `[n]` markers cite, read as
    the knowledge-base chat reads them (the chunks as they are now, or the saved quote)."""
    return chat_transcript(messages=messages_of_item(item_id, limit=limit))

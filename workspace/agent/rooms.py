"""What apps built on items add to their items' conversations: an investigation takes mentions and a
status from its agent. Such an app registers its room at start-up, so the agent never imports it."""

from __future__ import annotations

from typing import Protocol

from workspace.items.models import Item


class ConversationRoom(Protocol):
    def enter(self, item: Item) -> bool:
        """Called as an agent turn starts (a write): True when `item` takes mentions and a status."""
        ...

    def mention(self, *, item_id: int, user_ids: list[str], note: str, asked_by: str) -> None:
        """Mentions with actor null; `asked_by` is the person whose message the agent answers."""
        ...

    def set_status(self, *, item_id: int, status: str, asked_by: str) -> None: ...


_rooms: dict[str, ConversationRoom] = {}


def register_room(*, app_slug: str, room: ConversationRoom) -> None:
    _rooms[app_slug] = room


def room_for(item: Item) -> ConversationRoom | None:
    """The room `item`'s conversation happens in, if its app registered one and the item enters it."""
    room = _rooms.get(item.app_slug)
    return room if room is not None and room.enter(item) else None

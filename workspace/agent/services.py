"""Chat send: the quota gate, the user's message, the warm-up, then the agent turn."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from collab.actor import Actor
from collab.errors import Invalid
from collab.slots import slot_release, slot_released_after, slot_take
from workspace.agent.messages import message_append
from workspace.agent.models import ItemMessage
from workspace.agent.turns import TurnEvent, agent_turn_events
from workspace.items import lifecycle
from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import Item

logger = logging.getLogger(__name__)
MAX_MESSAGE_CHARS = 20_000


@dataclass(frozen=True)
class ChatTurn:
    message: ItemMessage
    replies: list[ItemMessage]


def _validated_content(content: Any) -> str:
    if not isinstance(content, str) or not content.strip():
        raise Invalid(error="empty_message", detail="The message is empty.")
    if len(content) > MAX_MESSAGE_CHARS:
        raise Invalid(error="message_too_long", detail=f"A message is at most {MAX_MESSAGE_CHARS} characters.")
    return content.strip()


def chat_send_gate(*, item: Item, app: AppDescriptor) -> None:
    """THE admission gate of chat send (spec "Limits" 7): it runs before the user message is stored.

    Opening the item's sandbox goes through admission, where the quota layer refuses a new
    sandbox with 507 (`sandbox_quota_exceeded`); an unreachable backend answers 503. Either
    propagates and nothing is stored. Pure chat turns pass here too: the agent may run a
    command at any point of its turn, and a first exec inside the turn is too late to refuse.
    An item with a live sandbox is always admitted (spec "Limits" 6).
    """
    lifecycle.sandbox_for_item(item=item, app=app)


def _warm_up(item: Item, app: AppDescriptor) -> None:
    """The turn-start warm-up: makes sure the sandbox is there; its errors are logged and swallowed,
    so it is never where a refusal is decided (spec "Limits" 7)."""
    try:
        lifecycle.sandbox_for_item(item=item, app=app)
    except Exception:  # any failure: by contract the warm-up never fails a turn
        logger.warning("sandbox warm-up for item %s failed; the turn goes on", item.pk, exc_info=True)


def chat_send(*, item: Item, app: AppDescriptor, actor: Actor, content: Any) -> ChatTurn:
    """Validate, take one of the sender's command slots (429 when all are taken), gate, store the
    user's message, warm up, run the agent turn; the slot is held for the whole turn, whose
    commands hold this thread.

    Not one transaction: the agent's commands run for seconds, and each message commits on its
    own so the conversation shows what happened even when a later step fails.
    """
    message, events = chat_send_streaming(item=item, app=app, actor=actor, content=content)
    return ChatTurn(message=message, replies=[event for event in events if isinstance(event, ItemMessage)])


def chat_send_streaming(
    *, item: Item, app: AppDescriptor, actor: Actor, content: Any
) -> tuple[ItemMessage, Iterator[TurnEvent]]:
    """`chat_send` as it happens: validated, one of the sender's command slots taken, gated and the
    user's message stored before this returns (so refusals come back as plain errors and nothing
    is stored); the turn runs as the events are read: the agent's text as written, its tool calls,
    each reply once stored. The slot is given back when the turn ends."""
    text, user_id = _validated_content(content), actor.user_id
    slot = slot_take(user_id=user_id, seconds=get_config().sandbox.exec_timeout_max)
    try:
        chat_send_gate(item=item, app=app)
        message = message_append(item=item, role=ItemMessage.Role.USER, content=text, user_id=user_id)
    except BaseException:
        slot_release(slot)
        raise

    def turn() -> Iterator[TurnEvent]:
        _warm_up(item, app)
        yield from agent_turn_events(item=item, app=app, user_id=user_id, message=message)

    return message, slot_released_after(turn(), slot)

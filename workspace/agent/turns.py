"""Running one agent turn: bind the tools, ask the configured agent, store its replies."""

from __future__ import annotations

import logging

from workspace.agent.messages import message_append
from workspace.agent.models import ItemMessage
from workspace.agent.protocol import AgentReply, AgentTurn, get_agent
from workspace.agent.rooms import room_for
from workspace.agent.tools import ItemAgentTools
from workspace.items.config import AppDescriptor
from workspace.items.models import Item

logger = logging.getLogger(__name__)
FAILED_TURN = "The agent failed on this message; the details are in the service log."


def agent_turn_run(*, item: Item, app: AppDescriptor, user_id: str, message: ItemMessage) -> list[ItemMessage]:
    """Answers `message` (already stored); returns the agent's messages in the order stored."""
    tools = ItemAgentTools(item=item, app=app, user_id=user_id, message_id=message.pk, room=room_for(item))
    turn = AgentTurn(
        item_id=item.pk, app_slug=item.app_slug, user_id=user_id, content=message.content,
        in_investigation=tools.in_investigation,
    )  # fmt: skip
    try:
        replies = get_agent().respond(turn, tools)
    except Exception:
        logger.exception("agent turn on item %s failed", item.pk)
        replies = [AgentReply(content=FAILED_TURN)]
    return [
        message_append(
            item=item, role=ItemMessage.Role.AGENT, content=reply.content, user_id=None, citations=reply.citations
        )
        for reply in replies
    ]

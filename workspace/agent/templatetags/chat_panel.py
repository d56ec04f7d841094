"""`{% chat_panel app item %}`: an item's conversation, for the item page."""

from __future__ import annotations

from typing import Any

from django import template

from workspace.agent.selectors import conversation_of_item
from workspace.agent.turns import answering_agent
from workspace.items.config import AppDescriptor
from workspace.items.models import Item

register = template.Library()
PANEL_MESSAGES = 100


@register.inclusion_tag("agent/chat_panel.html")
def chat_panel(app: AppDescriptor, item: Item) -> dict[str, Any]:
    return {
        "app": app,
        "item": item,
        "conversation": conversation_of_item(item.pk, limit=PANEL_MESSAGES),
        "answering": answering_agent(app),
    }

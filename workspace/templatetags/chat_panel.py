"""`{% chat_panel app item %}`: an item's conversation and its workflows, for the item page."""

from __future__ import annotations

from typing import Any

from django import template

from workspace.chat.selectors import messages_of_item
from workspace.config import AppDescriptor
from workspace.models import Item
from workspace.workflows.definitions import recent_definitions

register = template.Library()
PANEL_MESSAGES = 100


@register.inclusion_tag("workspace/chat_panel.html", takes_context=True)
def chat_panel(context: template.Context, app: AppDescriptor, item: Item) -> dict[str, Any]:
    identity = context["request"].identity
    return {
        "app": app,
        "item": item,
        "conversation": messages_of_item(item.pk, limit=PANEL_MESSAGES),
        "workflows": recent_definitions(user_id=identity.user_id or "", is_staff=identity.is_staff),
    }

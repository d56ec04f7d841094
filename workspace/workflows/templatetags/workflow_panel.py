"""`{% workflow_panel app item %}`: the workflows the viewer may run, for the item page."""

from __future__ import annotations

from typing import Any

from django import template

from collab.actor import actor_of
from workspace.items.config import AppDescriptor
from workspace.items.models import Item
from workspace.workflows.definitions import recent_definitions

register = template.Library()


@register.inclusion_tag("workflows/workflow_panel.html", takes_context=True)
def workflow_panel(context: template.Context, app: AppDescriptor, item: Item) -> dict[str, Any]:
    return {"app": app, "item": item, "workflows": recent_definitions(actor=actor_of(context["request"]))}

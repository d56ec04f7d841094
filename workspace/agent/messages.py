"""The one write every conversation message goes through (user, agent, mention, system)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from workspace.agent.models import AgentStep, ItemMessage
from workspace.agent.protocol import TrailStep
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
    steps: Sequence[TrailStep] = (),
) -> ItemMessage:
    """One message of the item's conversation; `user_id` None marks the agent as its author.

    An agent message and its trail (`steps`) are stored together or not at all.
    """
    message = ItemMessage(
        item=item, role=role, content=storable(content), mentions=list(mentions), citations=list(citations)
    )
    message.stamp_created(user_id)
    message.save(force_insert=True)
    if steps:
        rows = [
            AgentStep(
                message=message,
                position=position,
                kind=step.kind,
                tool=storable(step.tool)[:40],
                arguments=storable(step.arguments),
                ok=step.ok,
                summary=storable(step.summary)[:300],
                output=storable(step.output),
                detail=storable(step.detail),
            )
            for position, step in enumerate(steps)
        ]
        for row in rows:
            row.stamp_created(None)
        AgentStep.objects.bulk_create(rows)
    return message


# A lone UTF-16 surrogate: valid in a JSON string ("\ud800"), so a model can send one, but no
# database (nor any HTTP request) can encode it.
_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(value: Any) -> Any:
    """`value` with every NUL character and lone surrogate replaced: PostgreSQL stores no NUL in
    text or JSON, nothing encodes a surrogate, and a model, a command or a file may well produce one."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value.replace("\x00", "\ufffd"))
    if isinstance(value, dict):
        return {storable(key): storable(part) for key, part in value.items()}
    if isinstance(value, list | tuple):
        return [storable(part) for part in value]
    return value

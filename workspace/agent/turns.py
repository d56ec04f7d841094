"""Running one agent turn: choose the app's agent, bind the tools, run it, store its replies.

An app descriptor chooses its agent (`agent = "model"` or `"deterministic"`, the default); the
model agent answers only where a provider is configured, and every other app keeps the agent
WORKSPACE_AGENT names (the deterministic built-in unless set).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from django.conf import settings
from django.utils.module_loading import import_string

from knowledge.answers import Restart
from workspace.agent.messages import message_append
from workspace.agent.models import ItemMessage
from workspace.agent.protocol import (
    Agent,
    AgentReply,
    AgentTurn,
    PastMessage,
    ToolStarted,
    TrailStep,
    get_agent,
)
from workspace.agent.rooms import room_for
from workspace.agent.tools import ItemAgentTools
from workspace.items.config import AppDescriptor
from workspace.items.models import Item

logger = logging.getLogger(__name__)
FAILED_TURN = "The agent failed on this message; the details are in the service log."
MODEL_AGENT = "workspace.agent.model.ModelAgent"
HISTORY_MESSAGES = 100

# What a turn yields as it goes: text pieces, a Restart (the text shown so far is withdrawn),
# tool calls starting and done, and each agent message once stored.
TurnEvent = str | Restart | ToolStarted | TrailStep | ItemMessage


@dataclass(frozen=True)
class AnsweringAgent:
    """Who answers an app's chats, as its pages say: `kind` is model, deterministic or custom
    (WORKSPACE_AGENT names another class); `wanted_model` when the app asks for the model agent
    and no provider is configured."""

    kind: str
    model: str = ""
    wanted_model: bool = False
    path: str = ""


def answering_agent(app: AppDescriptor) -> AnsweringAgent:
    wants_model = app.agent == "model"
    if wants_model and settings.WORKSPACE_LLM_BASE_URL:
        return AnsweringAgent(kind="model", model=settings.WORKSPACE_LLM_MODEL)
    if settings.WORKSPACE_AGENT != "workspace.agent.deterministic.DeterministicAgent":
        return AnsweringAgent(kind="custom", wanted_model=wants_model, path=settings.WORKSPACE_AGENT)
    return AnsweringAgent(kind="deterministic", wanted_model=wants_model)


def agent_for(app: AppDescriptor) -> Agent:
    if answering_agent(app).kind == "model":
        return import_string(MODEL_AGENT)()
    return get_agent()


def _history(item: Item, message: ItemMessage) -> tuple[PastMessage, ...]:
    rows = list(
        ItemMessage.objects.filter(item=item, pk__lt=message.pk)
        .order_by("-pk")
        .values_list("role", "created_by", "content")[:HISTORY_MESSAGES]
    )
    return tuple(PastMessage(role=role, author=author, content=content) for role, author, content in reversed(rows))


def agent_turn_events(*, item: Item, app: AppDescriptor, user_id: str, message: ItemMessage) -> Iterator[TurnEvent]:
    """Answers `message` (already stored) as the agent goes: whatever it streams, then each reply
    stored with its trail. An agent that fails (a bug, not a provider: the model agent says those
    itself) ends the turn with FAILED_TURN and the steps it had taken; the message stays."""
    tools = ItemAgentTools(item=item, app=app, user_id=user_id, message_id=message.pk, room=room_for(item))
    turn = AgentTurn(
        item_id=item.pk, app_slug=item.app_slug, user_id=user_id, content=message.content,
        in_investigation=tools.in_investigation, history=_history(item, message),
    )  # fmt: skip
    steps: list[TrailStep] = []
    shown = False
    try:
        agent = agent_for(app)
        stream = getattr(agent, "stream", None)
        events = stream(turn, tools) if stream is not None else iter(agent.respond(turn, tools))
        for event in events:
            if isinstance(event, AgentReply):
                yield _stored(item, event)
                steps, shown = [], False
                continue
            if isinstance(event, TrailStep):
                steps.append(event)
            shown = shown or isinstance(event, str)
            yield event
    except Exception:
        logger.exception("agent turn on item %s failed", item.pk)
        if shown:
            yield Restart(reason=FAILED_TURN)
        yield _stored(item, AgentReply(content=FAILED_TURN, steps=tuple(steps)))


def _stored(item: Item, reply: AgentReply) -> ItemMessage:
    return message_append(
        item=item,
        role=ItemMessage.Role.AGENT,
        content=reply.content,
        user_id=None,
        citations=reply.citations,
        steps=reply.steps,
    )


def agent_turn_run(*, item: Item, app: AppDescriptor, user_id: str, message: ItemMessage) -> list[ItemMessage]:
    """Answers `message` (already stored); returns the agent's messages in the order stored."""
    events = agent_turn_events(item=item, app=app, user_id=user_id, message=message)
    return [event for event in events if isinstance(event, ItemMessage)]

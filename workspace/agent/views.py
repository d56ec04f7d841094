"""The chat endpoint of an item: read the conversation, send a message (gate, store, agent turn)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict

from django.db import DataError
from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from collab.actor import actor_of
from collab.capacity import runs_long
from collab.edge import refusal_body
from collab.errors import DomainError, Invalid
from collab.events import EventStreamRenderer, event_frame, event_schema, event_stream, frames_to_the_end
from collab.serializers import ErrorOutputSerializer
from knowledge.answers import Restart
from workspace.agent import selectors, services
from workspace.agent.models import ItemMessage
from workspace.agent.protocol import ToolStarted, TrailStep
from workspace.agent.serializers import ChatMessageOutputSerializer, ChatSendInputSerializer, ChatTurnOutputSerializer
from workspace.agent.turns import TurnEvent
from workspace.items.web import ItemApiView

_ERRORS = {400: ErrorOutputSerializer, 404: ErrorOutputSerializer}


def _turn_frames(message: ItemMessage, events: Iterator[TurnEvent]) -> Iterator[bytes]:
    """`delta` ({text}) as the reply is written, `restart` ({detail}) when what was shown is
    withdrawn, `tool` ({tool, summary}) as a tool call starts and `step` (the trail entry) when it
    ends, then `turn` (the JSON answer: the message and the stored replies) or `error`. A reader who
    leaves mid-turn does not stop it: the turn runs to its end (within its limits) and is stored, so
    what the agent did is never lost with the page.
    """

    def frames(events: Iterator[TurnEvent]) -> Iterator[bytes]:
        replies: list[ItemMessage] = []
        for event in events:
            if isinstance(event, str):
                yield event_frame("delta", {"text": event})
            elif isinstance(event, Restart):
                yield event_frame("restart", {"detail": event.reason})
            elif isinstance(event, ToolStarted):
                yield event_frame("tool", {"tool": event.tool, "summary": event.summary})
            elif isinstance(event, TrailStep):
                yield event_frame("step", asdict(event))
            else:
                replies.append(event)
        turn = services.ChatTurn(message=message, replies=replies)
        yield event_frame("turn", ChatTurnOutputSerializer(turn).data)

    return frames_to_the_end(events, frames, refusals=(DomainError, DataError), refusal_body=refusal_body)


@runs_long
class ItemMessagesApi(ItemApiView):
    """For the APIs that start commands: a refusal that says when to come back (429, a person's
    command slots all taken) carries Retry-After."""

    renderer_classes = [JSONRenderer, EventStreamRenderer]

    # A list, never a stream: `Accept: text/event-stream` gets it as JSON too (EventStreamRenderer).
    @extend_schema(responses={(200, "application/json"): ChatMessageOutputSerializer(many=True), **_ERRORS})
    def get(self, request: Request, slug: str, item_id: int) -> Response:
        item = self.item
        return Response(ChatMessageOutputSerializer(selectors.messages_of_item(item.pk), many=True).data)

    @extend_schema(
        request=ChatSendInputSerializer,
        responses={
            (201, "application/json"): ChatTurnOutputSerializer,
            (200, "text/event-stream"): event_schema("delta", "restart", "tool", "step", "turn", "error"),
            429: ErrorOutputSerializer,
            500: ErrorOutputSerializer,
            503: ErrorOutputSerializer,
            507: ErrorOutputSerializer,
            **_ERRORS,
        },
        description=(
            "The quota gate runs first, then the message is stored, then the agent's turn; each agent "
            "message is stored whole with its trail (`steps`) once done. With `Accept: text/event-stream` "
            "the turn streams: `delta` events ({text}) as the reply is written, `restart` ({detail}) when "
            "the text shown so far is withdrawn, `tool` ({tool, summary}) as a tool call starts and `step` "
            "(its trail entry) when it ends, then one `turn` event (this JSON answer) or an `error` event. "
            "Refusals (400, 404, 429, 507...) come back as JSON before any event, with nothing stored."
        ),
    )
    def post(self, request: Request, slug: str, item_id: int) -> Response | StreamingHttpResponse:
        app, item = self.app, self.item
        if not isinstance(request.data, dict):
            raise Invalid(error="empty_message", detail="The body needs a 'content'.")
        content = request.data.get("content")
        if request.accepted_renderer.media_type == EventStreamRenderer.media_type:
            message, events = services.chat_send_streaming(item=item, app=app, actor=actor_of(request), content=content)
            return event_stream(_turn_frames(message, events))
        turn = services.chat_send(item=item, app=app, actor=actor_of(request), content=content)
        return Response(ChatTurnOutputSerializer(turn).data, status=201)

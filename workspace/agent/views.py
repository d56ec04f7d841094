"""The chat endpoint of an item: read the conversation, send a message (gate, store, agent turn)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from collab.api import ServiceApiView
from collab.errors import ApiError
from collab.serializers import ErrorOutputSerializer
from workspace.agent import selectors, services
from workspace.agent.serializers import ChatMessageOutputSerializer, ChatSendInputSerializer, ChatTurnOutputSerializer
from workspace.items.access import item_for_viewer

_ERRORS = {400: ErrorOutputSerializer, 404: ErrorOutputSerializer}


class ItemMessagesApi(ServiceApiView):
    @extend_schema(responses={200: ChatMessageOutputSerializer(many=True), **_ERRORS})
    def get(self, request: Request, slug: str, item_id: int) -> Response:
        _app, item = item_for_viewer(slug, item_id, user_id=request.user.id, is_staff=request.user.is_staff)
        return Response(ChatMessageOutputSerializer(selectors.messages_of_item(item.pk), many=True).data)

    @extend_schema(
        request=ChatSendInputSerializer,
        responses={
            201: ChatTurnOutputSerializer,
            500: ErrorOutputSerializer,
            503: ErrorOutputSerializer,
            507: ErrorOutputSerializer,
            **_ERRORS,
        },
    )
    def post(self, request: Request, slug: str, item_id: int) -> Response:
        app, item = item_for_viewer(slug, item_id, user_id=request.user.id, is_staff=request.user.is_staff)
        if not isinstance(request.data, dict):
            raise ApiError(status_code=400, error="empty_message", detail="The body needs a 'content'.")
        turn = services.chat_send(item=item, app=app, user_id=request.user.id, content=request.data.get("content"))
        return Response(ChatTurnOutputSerializer(turn).data, status=201)

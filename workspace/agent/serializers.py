"""Serializers of the chat endpoints of an item (module-level, uniquely named)."""

from __future__ import annotations

from rest_framework import serializers

from collab.serializers import BlankAsNullField
from knowledge.serializers import KbCitationOutputSerializer


class ChatSendInputSerializer(serializers.Serializer):
    # Validated by the service (empty or too long is 400 `empty_message` / `message_too_long`).
    content = serializers.JSONField(help_text="The message text; fenced sh blocks and `$ ` lines run.")


class ChatMessageOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    role = serializers.ChoiceField(choices=["user", "agent", "mention", "system"])
    content = serializers.CharField(allow_blank=True)
    mentions = serializers.ListField(child=serializers.CharField())
    citations = KbCitationOutputSerializer(many=True)
    created_by = BlankAsNullField(help_text="null for the agent")
    created_at = serializers.DateTimeField()


class ChatTurnOutputSerializer(serializers.Serializer):
    message = ChatMessageOutputSerializer()
    replies = ChatMessageOutputSerializer(many=True)

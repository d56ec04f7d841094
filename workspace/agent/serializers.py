"""Serializers of the chat endpoints of an item (module-level, uniquely named)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from collab.serializers import BlankAsNullField
from knowledge.serializers import KbCitationOutputSerializer
from workspace.agent.services import MAX_MESSAGE_CHARS


# What the service takes (`_validated_content`): some text besides whitespace, up to its length.
@extend_schema_field({"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE_CHARS, "pattern": "\\S"})
class _MessageTextField(serializers.JSONField):
    """Any JSON value, so the service answers a non-string, an empty or a too long message with its own
    codes (400 `empty_message` / `message_too_long`); documented as the string it must be."""


class ChatSendInputSerializer(serializers.Serializer):
    content = _MessageTextField(help_text="The message text; fenced sh blocks and `$ ` lines run.")


class AgentStepOutputSerializer(serializers.Serializer):
    """One step of the turn behind an agent message: a tool call and what came of it, or a note."""

    position = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=["tool", "note"])
    tool = serializers.CharField(allow_blank=True, help_text="The tool called; blank for a note.")
    arguments = serializers.JSONField(help_text="What the model passed to the tool.")
    ok = serializers.BooleanField(help_text="False when the tool refused or the call was malformed.")
    summary = serializers.CharField(help_text="One line saying what happened.")
    output = serializers.CharField(allow_blank=True, help_text="What the model was given back, cut to a size.")
    detail = serializers.JSONField(help_text="exit_code and timed_out, path and bytes, user_ids: by tool.")


class ChatMessageOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    role = serializers.ChoiceField(choices=["user", "agent", "mention", "system"])
    content = serializers.CharField(allow_blank=True)
    mentions = serializers.ListField(child=serializers.CharField())
    citations = KbCitationOutputSerializer(many=True)
    steps = AgentStepOutputSerializer(
        source="steps.all", many=True, read_only=True, help_text="The trail of an agent message; empty otherwise."
    )
    created_by = BlankAsNullField(help_text="null for the agent")
    created_at = serializers.DateTimeField()


class ChatTurnOutputSerializer(serializers.Serializer):
    message = ChatMessageOutputSerializer()
    replies = ChatMessageOutputSerializer(many=True)

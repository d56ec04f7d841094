"""Serializers of the investigation endpoints (module-level, uniquely named)."""

from __future__ import annotations

from rest_framework import serializers

from workspace.agent.serializers import ChatMessageOutputSerializer
from workspace.investigations.models import Investigation


class InvestigationCreateInputSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200, trim_whitespace=True)
    members = serializers.ListField(child=serializers.CharField(max_length=150), required=False, default=list)


# People one request may name: each is looked up in the directory (a query each with Django
# users), so a list of 100,000 made one request cost 100,000 queries. The KB's writers take 200 too.
MAX_PEOPLE = 200


class InvestigationMentionInputSerializer(serializers.Serializer):
    user_ids = serializers.ListField(
        child=serializers.CharField(max_length=150),
        min_length=1,
        max_length=MAX_PEOPLE,
        error_messages={"min_length": "Name at least one person to mention."},
        help_text="Each is notified; a mention does not make anyone a member (the owner adds members).",
    )
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)


class InvestigationMembersInputSerializer(serializers.Serializer):
    user_ids = serializers.ListField(
        child=serializers.CharField(max_length=150),
        min_length=1,
        max_length=MAX_PEOPLE,
        error_messages={"min_length": "Name at least one person to add."},
    )


class InvestigationStatusInputSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=Investigation.Status.choices)


class InvestigationOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk", help_text="Also the id of its item of the `rca` app.")
    title = serializers.CharField(source="item.title")
    status = serializers.ChoiceField(choices=Investigation.Status.choices)
    owner = serializers.CharField(source="item.created_by", help_text="The creator, who holds the permissions.")
    members = serializers.ListField(source="member_ids", child=serializers.CharField())
    item_url = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField(source="changed_at", help_text="Its own or its item's last change.")


class InvestigationDetailOutputSerializer(InvestigationOutputSerializer):
    messages = ChatMessageOutputSerializer(many=True)

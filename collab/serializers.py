"""Module-level, uniquely named serializers of the collaboration endpoints."""

from __future__ import annotations

from rest_framework import serializers

from collab.models import Notification
from collab.selectors import INBOX_DEFAULT_LIMIT, INBOX_MAX_LIMIT


class UserOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    section = serializers.CharField()
    email = serializers.CharField()
    photo_url = serializers.CharField(allow_null=True)


class NotificationOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    recipient = serializers.CharField()
    kind = serializers.ChoiceField(choices=Notification.Kind.choices)
    title = serializers.CharField()
    body = serializers.CharField()
    link = serializers.CharField()
    actor = serializers.CharField(allow_null=True)
    read = serializers.BooleanField()
    created_at = serializers.IntegerField(allow_null=True, help_text="Epoch milliseconds.")


class NotificationInboxOutputSerializer(serializers.Serializer):
    unread_count = serializers.IntegerField()
    results = NotificationOutputSerializer(many=True)


class NotificationInboxQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=INBOX_MAX_LIMIT, default=INBOX_DEFAULT_LIMIT)


class NotificationsMarkedOutputSerializer(serializers.Serializer):
    marked = serializers.IntegerField()


class ErrorOutputSerializer(serializers.Serializer):
    error = serializers.CharField()
    detail = serializers.CharField()


class ApiTokenCreateInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="What the token is for, e.g. the script's name.")


class ApiTokenOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The token's first characters, to recognise it.")
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class ApiTokenIssuedOutputSerializer(ApiTokenOutputSerializer):
    token = serializers.CharField(help_text="Shown once: send it as `Authorization: Token <token>`.")

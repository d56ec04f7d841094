"""Module-level, uniquely named serializers of the collaboration endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from collab import clock
from collab.models import Notification
from collab.selectors import INBOX_DEFAULT_LIMIT, INBOX_MAX_LIMIT, InboxFilter
from collab.tokens import IssuedToken


@extend_schema_field(OpenApiTypes.INT)
class EpochMsField(serializers.Field):
    """Epoch milliseconds: the spec's form for a notification's and a citation event's `created_at`.
    Every other time leaves the service as ISO 8601 (`serializers.DateTimeField`)."""

    def to_representation(self, value: datetime) -> int | None:
        return clock.epoch_ms(value)


class BlankAsNullField(serializers.CharField):
    """A string column where blank means "nobody" (the agent, no pending owner): null in the API."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, **kwargs)

    def to_representation(self, value: str) -> str | None:
        return value or None


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
    created_at = EpochMsField(allow_null=True, help_text="Epoch milliseconds.")


class NotificationInboxOutputSerializer(serializers.Serializer):
    unread_count = serializers.IntegerField()
    results = NotificationOutputSerializer(many=True)


class NotificationInboxQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=INBOX_MAX_LIMIT, default=INBOX_DEFAULT_LIMIT)
    unread = serializers.BooleanField(default=False, help_text="Only unread notifications.")
    # Empty (`kind=`, what the page's "all kinds" sends) is every kind, and the document says so.
    kind = serializers.ChoiceField(
        choices=Notification.Kind.choices,
        required=False,
        allow_blank=True,
        help_text="Only notifications of this kind (empty: every kind).",
    )

    def shown(self) -> InboxFilter:
        return InboxFilter(unread_only=self.validated_data["unread"], kind=self.validated_data.get("kind", ""))


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

    def to_representation(self, instance: IssuedToken) -> dict[str, Any]:
        return {**ApiTokenOutputSerializer(instance.row).data, "token": instance.token}

"""Fetch-and-authorise helpers: what is not yours looks exactly like what does not exist."""

from __future__ import annotations

from django.http import Http404

from collab.models import Notification


def notification_for_recipient(notification_id: int, user_id: str) -> Notification:
    notification = Notification.objects.filter(pk=notification_id, recipient=user_id).first()
    if notification is None:
        raise Http404("No such notification.")
    return notification

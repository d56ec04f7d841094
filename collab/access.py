"""Who may see a notification, for an actor: its recipient alone (no one else, staff included, reads
another's inbox). One (`notification_for`) and the SQL scope of a list (`notification_scope`);
what is not yours looks exactly like what does not exist (404)."""

from __future__ import annotations

from django.db.models import Q
from django.http import Http404

from collab.actor import Actor
from collab.models import Notification


def notification_scope(*, actor: Actor) -> Q:
    """The scope of an inbox, in SQL: the notifications addressed to `actor`."""
    return Q(recipient=actor.user_id) if actor.is_someone else Q(pk__in=[])


def notification_for(notification_id: int, *, actor: Actor) -> Notification:
    notification = Notification.objects.filter(notification_scope(actor=actor), pk=notification_id).first()
    if notification is None:
        raise Http404("No such notification.")
    return notification

"""Writes of the collaboration layer: sending notifications and marking them read."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from collab import clock
from collab.access import notification_for_recipient
from collab.models import Notification

VALID_KINDS = frozenset(Notification.Kind.values)


def notify(
    recipients: Iterable[str],
    kind: str,
    title: str,
    body: str = "",
    link: str = "",
    actor: str | None = None,
) -> list[str]:
    """Queues one notification per distinct recipient, inserted in one statement on commit.

    Producers call this inside their own transaction; if it rolls back nobody is notified.
    Returns the recipients that will be notified, in the order given.
    """
    if kind not in VALID_KINDS:
        raise ValueError(f"Unknown notification kind {kind!r}; expected one of {sorted(VALID_KINDS)}.")
    distinct = list(dict.fromkeys(r for r in recipients if r))
    if not distinct:
        return []

    def insert() -> None:
        moment = clock.now()
        Notification.objects.bulk_create(
            Notification(
                recipient=recipient,
                kind=kind,
                title=title,
                body=body,
                link=link,
                actor=actor,
                created_by=actor or "",
                updated_by=actor or "",
                created_at=moment,
                updated_at=moment,
            )
            for recipient in distinct
        )

    transaction.on_commit(insert)
    return distinct


@transaction.atomic
def notification_mark_read(*, notification_id: int, user_id: str) -> Notification:
    """Marks one of the caller's notifications read; marking it again changes nothing."""
    notification = notification_for_recipient(notification_id, user_id)
    if not notification.read:
        notification.read = True
        notification.stamp_updated(user_id)
        notification.save(update_fields=["read", "updated_by", "updated_at"])
    return notification


@transaction.atomic
def notifications_mark_all_read(*, user_id: str) -> int:
    return Notification.objects.filter(recipient=user_id, read=False).update(
        read=True, updated_by=user_id, updated_at=clock.now()
    )


@transaction.atomic
def notifications_mark_selected_read(*, notification_ids: list[int], user_id: str) -> int:
    """Admin path: marks any recipients' notifications read, recording who did it."""
    return Notification.objects.filter(pk__in=notification_ids, read=False).update(
        read=True, updated_by=user_id, updated_at=clock.now()
    )

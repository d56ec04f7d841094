"""Writes of the collaboration layer: sending notifications and marking them read."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection, transaction

from collab import clock
from collab.access import notification_for
from collab.actor import Actor
from collab.models import InboxVersion, Notification

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

    @transaction.atomic
    def insert() -> None:
        moment = clock.now()
        inbox_changed(recipients=distinct)
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
def notification_mark_read(*, notification_id: int, actor: Actor) -> Notification:
    """Marks one of the caller's notifications read; marking it again changes nothing."""
    notification = notification_for(notification_id, actor=actor)
    if not notification.read:
        notification.read = True
        notification.stamp_updated(actor.user_id)
        notification.save(update_fields=["read", "updated_by", "updated_at"])  # inbox_changed by the signal
    return notification


@transaction.atomic
def notifications_mark_all_read(*, user_id: str) -> int:
    marked = Notification.objects.filter(recipient=user_id, read=False).update(
        read=True, updated_by=user_id, updated_at=clock.now()
    )
    if marked:
        inbox_changed(recipients=[user_id])
    return marked


@transaction.atomic
def notifications_mark_selected_read(*, notification_ids: list[int], user_id: str) -> int:
    """Admin path: marks any recipients' notifications read, recording who did it."""
    unread = Notification.objects.filter(pk__in=notification_ids, read=False)
    recipients = sorted(set(unread.values_list("recipient", flat=True)))
    inbox_changed(recipients=recipients)
    return unread.update(read=True, updated_by=user_id, updated_at=clock.now())


def inbox_changed(*, recipients: Iterable[str]) -> None:
    """Moves on the InboxVersion of each recipient, in the caller's transaction: one upsert
    statement (SQLite and PostgreSQL both have ON CONFLICT), recipients in order so two
    transactions never wait on each other's rows crosswise."""
    ordered = sorted(set(recipients))
    if not ordered:
        return
    table = connection.ops.quote_name(InboxVersion._meta.db_table)
    values = ", ".join(["(%s, 1)"] * len(ordered))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (recipient, version) VALUES {values} "
            f"ON CONFLICT (recipient) DO UPDATE SET version = {table}.version + 1",
            ordered,
        )


def notification_saved(*, instance: Notification, **_signal: object) -> None:
    """Any one notification saved or deleted (admin, a cascade, mark read): its inbox changed."""
    inbox_changed(recipients=[instance.recipient])


def notification_moving(*, instance: Notification, update_fields: Iterable[str] | None = None, **_: object) -> None:
    """Before a save that may give a notification another recipient (admin): the old inbox changes too."""
    if instance.pk is None or (update_fields is not None and "recipient" not in update_fields):
        return
    before = Notification.objects.filter(pk=instance.pk).values_list("recipient", flat=True).first()
    if before is not None and before != instance.recipient:
        inbox_changed(recipients=[before])

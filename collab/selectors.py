"""Reads of the collaboration layer: the inbox and the cheap state probe behind its ETag."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.utils.http import url_has_allowed_host_and_scheme

from collab.identity import get_user_directory
from collab.models import Notification
from collab.web import rooted

INBOX_DEFAULT_LIMIT = 50
INBOX_MAX_LIMIT = 200

NOTIFICATION_FIELDS = ("id", "recipient", "kind", "title", "body", "link", "actor", "read", "created_at")


@dataclass(frozen=True)
class InboxFilter:
    """Which notifications a listing shows: all or only unread, of every kind or of one."""

    unread_only: bool = False
    kind: str = ""

    def fingerprint(self) -> str:
        return f"{int(self.unread_only)}|{self.kind}"


EVERYTHING = InboxFilter()


@dataclass(frozen=True)
class InboxState:
    """Everything that changes when anything in the inbox changes: inserts, reads, edits."""

    user_id: str
    latest_change: Any
    unread_count: int
    # A deleted notification (staff, in admin) changes neither of the above when it was read and
    # not the newest; the total does.
    total_count: int = 0

    def etag(self, *, limit: int, shown: InboxFilter = EVERYTHING) -> str:
        counts = f"{self.unread_count}|{self.total_count}"
        fingerprint = f"{self.user_id}|{self.latest_change}|{counts}|{limit}|{shown.fingerprint()}"
        return '"' + hashlib.blake2b(fingerprint.encode(), digest_size=12).hexdigest() + '"'


@dataclass(frozen=True)
class Inbox:
    state: InboxState
    results: list[dict[str, Any]]


def inbox_state(*, user_id: str) -> InboxState:
    """One statement, three index seeks: the newest change, the unread count and the total."""
    table = connection.ops.quote_name(Notification._meta.db_table)
    q = connection.ops.quote_name
    sql = (
        f"SELECT (SELECT MAX({q('updated_at')}) FROM {table} WHERE {q('recipient')} = %s), "
        f"(SELECT COUNT(*) FROM {table} WHERE {q('recipient')} = %s AND {q('read')} = %s), "
        f"(SELECT COUNT(*) FROM {table} WHERE {q('recipient')} = %s)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [user_id, user_id, False, user_id])
        latest_change, unread_count, total_count = cursor.fetchone()
    return InboxState(
        user_id=user_id,
        latest_change=latest_change,
        unread_count=int(unread_count or 0),
        total_count=int(total_count or 0),
    )


def inbox(
    *,
    user_id: str,
    limit: int = INBOX_DEFAULT_LIMIT,
    state: InboxState | None = None,
    shown: InboxFilter = EVERYTHING,
) -> Inbox:
    """Unread first, then newest first, at most `limit` rows (served by `notif_inbox_idx`; a kind
    filter by `notif_kind_idx`)."""
    rows = Notification.objects.filter(recipient=user_id)
    if shown.unread_only:
        rows = rows.filter(read=False)
    if shown.kind:
        rows = rows.filter(kind=shown.kind)
    rows = rows.order_by("read", "-created_at", "-id").values(*NOTIFICATION_FIELDS)[:limit]
    return Inbox(
        state=state or inbox_state(user_id=user_id),
        results=list(rows),
    )


def _followable(link: str) -> str:
    """A spec path under the root path, or an http(s) address; anything else (a `javascript:`
    link typed in admin, a path a browser reads as another site such as `/\\host`) is not
    rendered as a link at all."""
    if link.startswith("/"):
        return rooted(link) if url_has_allowed_host_and_scheme(link, allowed_hosts=None) else ""
    return link if link.startswith(("https://", "http://")) else ""


def inbox_for_display(inbox: Inbox) -> Inbox:
    """Adds what a person reads instead of ids: the actor's name and the link under the root path."""
    directory = get_user_directory()
    for row in inbox.results:
        row["href"] = _followable(row["link"])
        actor = directory.get(row["actor"]) if row["actor"] else None
        row["actor_name"] = actor.name if actor else row["actor"]
    return inbox


def unread_count(*, user_id: str) -> int:
    return Notification.objects.filter(recipient=user_id, read=False).count()

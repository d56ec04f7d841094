"""Reads of the collaboration layer: the inbox and the one-row version behind its ETag."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Count, Subquery
from django.db.models.functions import Coalesce
from django.utils.http import url_has_allowed_host_and_scheme

from collab.identity import get_user_directory
from collab.models import InboxVersion, Notification
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
    """The version of a person's inbox (collab.models.InboxVersion): it moves with every insert,
    read, edit and delete of their notifications."""

    user_id: str
    version: int

    def etag(self, *, limit: int, shown: InboxFilter = EVERYTHING) -> str:
        fingerprint = f"{self.user_id}|{self.version}|{limit}|{shown.fingerprint()}"
        return '"' + hashlib.blake2b(fingerprint.encode(), digest_size=12).hexdigest() + '"'


@dataclass(frozen=True)
class Inbox:
    state: InboxState
    unread_count: int
    results: list[dict[str, Any]]


def inbox_state(*, user_id: str) -> InboxState:
    """One primary-key read, whatever the size of the inbox: the poll's 304 costs this alone (in
    SQL of its own: the ORM would spend longer building the statement than the database running it)."""
    q = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {q('version')} FROM {q(InboxVersion._meta.db_table)} WHERE {q('recipient')} = %s", [user_id]
        )
        row = cursor.fetchone()
    return InboxState(user_id=user_id, version=row[0] if row else 0)


def inbox(
    *,
    user_id: str,
    limit: int = INBOX_DEFAULT_LIMIT,
    state: InboxState | None = None,
    shown: InboxFilter = EVERYTHING,
) -> Inbox:
    """Unread first, then newest first, at most `limit` rows (served by `notif_inbox_idx`; a kind
    filter by `notif_kind_idx`), and the unread count (the same index)."""
    rows = Notification.objects.filter(recipient=user_id)
    if shown.unread_only:
        rows = rows.filter(read=False)
    if shown.kind:
        rows = rows.filter(kind=shown.kind)
    # The unread count rides along with the rows (an uncorrelated subquery, computed once), so
    # a full poll stays two statements with the version; an empty page asks for it apart.
    unread = (
        Notification.objects.filter(recipient=user_id, read=False)
        .order_by()
        .values("recipient")
        .annotate(total=Count("pk"))
        .values("total")
    )
    rows = (
        rows.order_by("read", "-created_at", "-id")
        .annotate(unread_total=Coalesce(Subquery(unread), 0))
        .values(*NOTIFICATION_FIELDS, "unread_total")[:limit]
    )
    results = list(rows)
    count = results[0]["unread_total"] if results else unread_count(user_id=user_id)
    for row in results:
        del row["unread_total"]
    return Inbox(state=state or inbox_state(user_id=user_id), unread_count=count, results=results)


def _followable(link: str) -> str:
    """A spec path under the root path, or an http(s) address; anything else (a `javascript:`
    link typed in admin, a path a browser reads as another site such as `/\\host`) is not
    rendered as a link at all."""
    if link.startswith("/"):
        return rooted(link) if url_has_allowed_host_and_scheme(link, allowed_hosts=None) else ""
    return link if link.startswith(("https://", "http://")) else ""


def inbox_for_display(inbox: Inbox) -> Inbox:
    """Adds what a person reads instead of ids: the actor's name and the link under the root path."""
    for row in inbox.results:
        _for_display(row)
    return inbox


def _for_display(row: dict[str, Any]) -> dict[str, Any]:
    row["href"] = _followable(row["link"])
    actor = get_user_directory().get(row["actor"]) if row["actor"] else None
    row["actor_name"] = actor.name if actor else row["actor"]
    return row


def mention_leading_to(*, user_id: str, link: str) -> dict[str, Any] | None:
    """The latest mention of `user_id` that links to `link`, for display (`inbox_for_display`), or
    None: what they were already told of a page that will not open for them. One query."""
    row = (
        Notification.objects.filter(recipient=user_id, kind=Notification.Kind.MENTION, link=link)
        .order_by("-created_at", "-id")
        .values("title", "body", "link", "actor", "created_at")
        .first()
    )
    return None if row is None else _for_display(row)


def unread_count(*, user_id: str) -> int:
    return Notification.objects.filter(recipient=user_id, read=False).count()

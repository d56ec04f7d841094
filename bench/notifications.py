"""One notification poll, with and without If-None-Match, and filtered (unread only; one rare kind,
the notifications page's filters), as the table grows.

.venv/bin/python bench/notifications.py [--sizes 1000,100000,1000000] [--database-url postgres://...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import measure, parse_args, print_table, setup_django

POLLED_USER = "alice"
POLLED_USER_ROWS = 10_000
BATCH = 20_000


def fill(total: int, already: int) -> None:
    """Grows the table to `total` rows: the polled user's share first, everyone else's after."""
    from datetime import timedelta

    from django.utils import timezone

    from collab.models import Notification

    start = timezone.now() - timedelta(days=30)
    mine = min(POLLED_USER_ROWS, total)
    rows = []
    for index in range(already, total):
        recipient = POLLED_USER if index < mine else f"user{index % 5000}"
        moment = start + timedelta(seconds=index)
        rows.append(
            Notification(
                recipient=recipient,
                # One in a hundred is a share: the rare kind a filter has to find among the rest.
                kind="share" if index % 100 == 0 else "mention",
                title=f"Mention {index}",
                link=f"/investigations/{index % 977}",
                actor="bob",
                read=index % 10 != 0,
                created_at=moment,
                updated_at=moment,
            )
        )
        if len(rows) == BATCH:
            Notification.objects.bulk_create(rows)
            rows.clear()
    Notification.objects.bulk_create(rows)


def main() -> None:
    args = parse_args(__doc__ or "", "1000,100000,1000000")
    vendor = setup_django(args.database_url, "notifications")
    from django.db import connection
    from django.test import Client

    client = Client(HTTP_X_USER_ID=POLLED_USER)
    figures = []
    filled = 0
    for size in sorted(args.sizes):
        fill(size, filled)
        filled = size
        if vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE collab_notification")
        else:
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        etag = client.get("/notifications")["ETag"]
        figures.append(measure("poll, full body (limit 50)", size, args.repeat, lambda: client.get("/notifications")))
        figures.append(
            measure("poll, unread only", size, args.repeat, lambda: client.get("/notifications?unread=true"))
        )
        figures.append(
            measure("poll, one rare kind", size, args.repeat, lambda: client.get("/notifications?kind=share"))
        )
        figures.append(
            measure(
                "poll, If-None-Match -> 304",
                size,
                args.repeat,
                lambda etag=etag: client.get("/notifications", HTTP_IF_NONE_MATCH=etag),
            )
        )
    print_table(vendor, figures)


if __name__ == "__main__":
    main()

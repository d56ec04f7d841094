"""Factories for test data; each returns a saved row with sensible defaults."""

from __future__ import annotations

from itertools import count
from typing import Any

from collab import clock
from collab.models import Notification

_sequence = count(1)


def make_notification(**overrides: Any) -> Notification:
    number = next(_sequence)
    moment = overrides.pop("created_at", None) or clock.now()
    fields: dict[str, Any] = {
        "recipient": "alice",
        "kind": Notification.Kind.MENTION,
        "title": f"Notification {number}",
        "body": "",
        "link": "",
        "actor": "bob",
        "read": False,
        "created_at": moment,
        "updated_at": moment,
    }
    fields.update(overrides)
    return Notification.objects.create(**fields)

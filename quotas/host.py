"""What the quotas need from the workspace, installed by it at start-up (quotas never imports workspace).

docs/ARCHITECTURE.md §2 puts `quotas` below `workspace`: the gates are handed item facts in their calls,
and for the rest (site defaults, an item's app and title, a workspace's live size, shutting a
sandbox down) the workspace installs one `QuotaHost` from its `AppConfig.ready`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from collab.actor import Actor
    from quotas.values import UserLimits


@dataclass(frozen=True)
class ItemFacts:
    """An item as the quotas see it: the app that sets its disk limit and who pays for it."""

    app_slug: str
    payer: str


@dataclass(frozen=True)
class ItemLink:
    """How my-resources names and links an item."""

    item_id: str
    app_slug: str
    title: str
    url: str


@dataclass(frozen=True)
class Handover:
    """An item whose bill someone asked this person to take over; it waits for their answer."""

    item_id: str
    app_slug: str
    title: str
    requested_by: str
    requested_at: datetime | None


@dataclass(frozen=True)
class PaidItem:
    """An item someone else created that this person pays for: they may open it to free its disk
    and hand its bill back. `named_by` made them pay at `named_at`: staff without asking when
    `assigned`, else by their consent (they accepted a request from `named_by`, or named themselves)."""

    item_id: str
    app_slug: str
    title: str
    created_by: str
    url: str = ""
    named_by: str = ""
    named_at: datetime | None = None
    assigned: bool = False


class QuotaHost(Protocol):
    def site_limits(self) -> UserLimits:
        """`resources.per_user` of the config in force."""

    def app_disk_limit(self, app_slug: str) -> int | None:
        """The app's resolved disk limit in bytes (0 = unlimited); None for an unknown app."""

    def workspace_bytes(self, item_id: str) -> int:
        """Bytes on disk in the item's workspace right now (the exact, immediate figure)."""

    def item_facts(self, item_id: str) -> ItemFacts | None:
        """App and payer (a blank `owner` column already replaced by the creator); None if there is no such item."""

    def describe_items(self, item_ids: Sequence[str], *, viewer: Actor) -> dict[str, ItemLink]:
        """Titles of the items that still exist; a page link only where `viewer` may open the page
        (the payer of someone else's item may: there they free its disk)."""

    def pending_handovers(self, user_id: str) -> list[Handover]:
        """Items waiting for `user_id` to accept paying for them, oldest request first."""

    def paid_for_others(self, user_id: str) -> list[PaidItem]:
        """Items `user_id` pays for but did not create, oldest first: the bills they may hand back."""

    def sandbox_close(self, item_id: str, *, closed_by: str) -> int:
        """Truly shuts the item's sandbox down for `closed_by` (a command it stops names them);
        returns how many sandboxes were closed."""


_installed: list[QuotaHost] = []


def install(host: QuotaHost) -> None:
    _installed[:] = [host]


def installed() -> QuotaHost:
    if not _installed:
        raise ImproperlyConfigured("No QuotaHost is installed: the workspace app installs one when it starts.")
    return _installed[0]

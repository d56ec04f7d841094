"""Items as a Django app; start-up loads the config, wires the quotas in, or fails."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:
    from collab.actor import Actor
    from quotas.host import Handover, ItemFacts, ItemLink, PaidItem
    from quotas.values import UserLimits

logger = logging.getLogger("workspace.quotas")


class WorkspaceQuotaHost:
    """The workspace's answers to the quotas (`quotas.host.QuotaHost`), which may not import us."""

    def site_limits(self) -> UserLimits:
        from workspace.items.config import get_config

        return get_config().per_user

    def app_disk_limit(self, app_slug: str) -> int | None:
        from workspace.items.config import get_config

        app = get_config().app(app_slug)
        return None if app is None else app.resources.disk_bytes

    def workspace_bytes(self, item_id: str) -> int:
        from workspace.items import filestore

        return filestore.workspace_bytes(filestore.workspace_dir(item_id))

    def item_facts(self, item_id: str) -> ItemFacts | None:
        from quotas.host import ItemFacts
        from workspace.items.models import Item

        if not item_id.isdigit():
            return None
        row = Item.objects.filter(pk=int(item_id)).values_list("app_slug", "owner", "created_by").first()
        return None if row is None else ItemFacts(app_slug=row[0], owner=row[1] or row[2])

    def describe_items(self, item_ids: Sequence[str], *, viewer: Actor) -> dict[str, ItemLink]:
        from django.urls import reverse

        from quotas.host import ItemLink
        from workspace.items.access import item_rights
        from workspace.items.models import Item

        numbers = [int(item_id) for item_id in item_ids if item_id.isdigit() and len(item_id) < 19]
        if not numbers:
            return {}
        rows = list(Item.objects.filter(pk__in=numbers).only("pk", "app_slug", "title", "created_by", "owner"))
        # Whoever has any right to an item opens its page: its payer too, to free its disk there
        # (docs/ARCHITECTURE.md §5).
        openable = item_rights(rows, actor=viewer)
        return {
            str(item.pk): ItemLink(
                item_id=str(item.pk),
                app_slug=item.app_slug,
                title=item.title,
                url=reverse("ws-item", args=[item.app_slug, item.pk]) if item.pk in openable else "",
            )
            for item in rows
        }

    def pending_handovers(self, user_id: str) -> list[Handover]:
        from quotas.host import Handover
        from workspace.items.models import Item

        rows = (
            Item.objects.filter(pending_owner=user_id)
            .exclude(pending_owner="")
            .order_by("pending_owner_requested_at", "pk")
        )
        return [
            Handover(
                item_id=str(row.pk),
                app_slug=row.app_slug,
                title=row.title,
                requested_by=row.pending_owner_requested_by,
                requested_at=row.pending_owner_requested_at,
            )
            for row in rows[:100]
        ]

    def paid_for_others(self, user_id: str) -> list[PaidItem]:
        from django.db.models import F
        from django.urls import reverse

        from quotas.host import PaidItem
        from workspace.items.models import Item

        rows = Item.objects.filter(owner=user_id).exclude(created_by=F("owner")).order_by("pk")
        return [
            PaidItem(
                item_id=str(row.pk),
                app_slug=row.app_slug,
                title=row.title,
                created_by=row.created_by,
                url=reverse("ws-item", args=[row.app_slug, row.pk]),
                named_by=row.owner_named_by,
                named_at=row.owner_named_at,
                assigned=row.owner_assigned,
            )
            for row in rows[:100]
        ]

    def sandbox_close(self, item_id: str, *, closed_by: str) -> int:
        from workspace.items.models import Item
        from workspace.items.sandboxes.lifecycle import sandbox_close

        if not item_id.isdigit():
            return 0
        # Closing needs only the item's id; a sandbox whose item row is gone is shut down too.
        item = Item.objects.filter(pk=int(item_id)).first() or Item(pk=int(item_id))
        return sandbox_close(item=item, closed_by=closed_by)


class ItemsConfig(AppConfig):
    name = "workspace.items"
    label = "items"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workspace.items import checks  # noqa: F401 (registers the system checks)
        from workspace.items.config import get_config
        from workspace.items.sandboxes.boundary import boundary_warnings, configured_boundary
        from workspace.items.sandboxes.isolation import (
            cap_warnings,
            configured_cap,
            configured_driver,
            warn_about_enforcement,
        )
        from workspace.items.volumes import enforcement_warnings

        # A bad config or descriptor raises ImproperlyConfigured naming the file and key; so does
        # a local backend without bubblewrap outside DEBUG, or a cap that is no size.
        config = get_config()
        cap = configured_cap()
        if config.sandbox.backend == "local":
            warn_about_enforcement(configured_driver())
            sizes = {app.slug: app.resources.sandbox for app in config.apps.values()}
            for warning in boundary_warnings(configured_boundary()) + enforcement_warnings() + cap_warnings(sizes, cap):
                logger.warning(warning)
        install_quotas()
        for warning in quota_warnings():
            logger.warning(warning)


def install_quotas() -> None:
    """Hands the quotas what they need and puts the disk check on every growing write."""
    from quotas import host
    from quotas.disk import disk_write_check, disk_write_headroom
    from workspace.items import filestore

    host.install(WorkspaceQuotaHost())
    filestore.register_write_check(disk_write_check)
    filestore.register_write_headroom(disk_write_headroom)


def quota_warnings() -> list[str]:
    """The per-user dimensions the configured apps cannot be held to (spec "Limits" 5)."""
    from quotas.startup import unenforceable_warnings
    from workspace.items.config import get_config

    sizes = {app.slug: app.resources.sandbox for app in get_config().apps.values()}
    return unenforceable_warnings(site=WorkspaceQuotaHost().site_limits(), apps=sizes)

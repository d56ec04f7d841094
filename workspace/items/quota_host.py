"""The workspace's answers to the quotas (`quotas.host.QuotaHost`), which may not import us: each
one a call into the items' own modules, installed by `ItemsConfig.ready`."""

from __future__ import annotations

from collections.abc import Sequence

from collab.actor import Actor
from quotas.host import Handover, ItemFacts, ItemLink, PaidItem
from quotas.values import UserLimits
from workspace.items import access, selectors
from workspace.items.config import get_config
from workspace.items.lifecycle import sandbox_close
from workspace.items.models import Item
from workspace.sandboxes import filestore


class WorkspaceQuotaHost:
    def site_limits(self) -> UserLimits:
        return get_config().per_user

    def app_disk_limit(self, app_slug: str) -> int | None:
        app = get_config().app(app_slug)
        return None if app is None else app.resources.disk_bytes

    def workspace_bytes(self, item_id: str) -> int:
        return filestore.workspace_bytes(filestore.workspace_dir(item_id))

    def item_facts(self, item_id: str) -> ItemFacts | None:
        return selectors.item_facts(item_id)

    def describe_items(self, item_ids: Sequence[str], *, viewer: Actor) -> dict[str, ItemLink]:
        return access.item_links(item_ids, actor=viewer)

    def pending_handovers(self, user_id: str) -> list[Handover]:
        return selectors.pending_handovers(user_id=user_id)

    def paid_for_others(self, user_id: str) -> list[PaidItem]:
        return selectors.paid_for_others(user_id=user_id)

    def sandbox_close(self, item_id: str, *, closed_by: str) -> int:
        if not item_id.isdigit():
            return 0
        # Closing needs only the item's id; a sandbox whose item row is gone is shut down too.
        item = Item.objects.filter(pk=int(item_id)).first() or Item(pk=int(item_id))
        return sandbox_close(item=item, closed_by=closed_by)

"""An item's workspace as the sandbox runtime knows it: the item's id, and its app's disk limit.

The runtime (workspace/sandboxes) knows workspaces by id alone; what the quota layer's write checks
charge a write to (the app, the payer) rides along on the reference, which the file store hands
them unread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workspace.items.config import get_config
from workspace.items.models import Item
from workspace.sandboxes.filestore import WorkspaceRef, workspace_prepared


@dataclass(frozen=True)
class ItemWorkspace(WorkspaceRef):
    """An item's workspace, with the app and the payer its writes are checked against."""

    app_slug: str = ""
    payer: str = ""


def app_disk_limit(app_slug: str) -> int | None:
    """The app's workspace disk limit (None: an app this server no longer configures)."""
    app = get_config().app(app_slug)
    return app.resources.disk_bytes if app else None


def item_workspace_ref(item: Item) -> ItemWorkspace:
    return ItemWorkspace(
        workspace_id=item.pk,
        limit_bytes=app_disk_limit(item.app_slug),
        title=item.title,
        app_slug=item.app_slug,
        payer=item.payer,
    )


def item_workspace_root(item: Item) -> Path:
    """The item's workspace, mounted on an image of its app's disk limit where images are used."""
    return workspace_prepared(item.pk, limit_bytes=app_disk_limit(item.app_slug))

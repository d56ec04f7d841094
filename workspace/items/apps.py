"""Items as a Django app; start-up loads the config, wires the quotas in, or fails."""

from __future__ import annotations

import logging

from django.apps import AppConfig

logger = logging.getLogger("workspace.quotas")


class ItemsConfig(AppConfig):
    name = "workspace.items"
    label = "items"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workspace.items import checks  # noqa: F401 (registers the system checks)
        from workspace.items.config import get_config
        from workspace.sandboxes.boundary import boundary_warnings, configured_boundary
        from workspace.sandboxes.isolation import (
            cap_warnings,
            configured_cap,
            configured_driver,
            warn_about_enforcement,
        )
        from workspace.sandboxes.volumes import enforcement_warnings

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
    from workspace.items.quota_host import WorkspaceQuotaHost
    from workspace.sandboxes import filestore

    host.install(WorkspaceQuotaHost())
    filestore.register_write_check(disk_write_check)
    filestore.register_write_headroom(disk_write_headroom)


def quota_warnings() -> list[str]:
    """The per-user dimensions the configured apps cannot be held to (spec "Limits" 5)."""
    from quotas.startup import unenforceable_warnings
    from workspace.items.config import get_config

    config = get_config()
    sizes = {app.slug: app.resources.sandbox for app in config.apps.values()}
    return unenforceable_warnings(site=config.per_user, apps=sizes)

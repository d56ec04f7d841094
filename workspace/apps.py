"""The workspace core as a Django app; start-up loads the config and app descriptors or fails."""

from django.apps import AppConfig


class WorkspaceConfig(AppConfig):
    name = "workspace"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workspace.config import get_config
        from workspace.sandboxes.isolation import configured_driver, warn_about_enforcement

        # A bad config or descriptor raises ImproperlyConfigured naming the file and key.
        config = get_config()
        if config.sandbox.backend == "local":
            warn_about_enforcement(configured_driver())

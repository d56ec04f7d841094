"""Collaboration app: refuses mock identity outside DEBUG at start-up."""

from django.apps import AppConfig
from django.conf import settings


class CollabConfig(AppConfig):
    name = "collab"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from collab import schema  # noqa: F401 - registers the OpenAPI authentication scheme
        from collab.identity import check_mock_identity_allowed

        check_mock_identity_allowed(
            debug=settings.DEBUG,
            allow_flag=settings.WORKSPACE_ALLOW_MOCK_IDENTITY,
            directory_path=settings.WORKSPACE_USER_DIRECTORY,
            provider_path=settings.WORKSPACE_CURRENT_USER_PROVIDER,
        )

"""Collaboration app: refuses mock identity outside DEBUG at start-up."""

from django.apps import AppConfig
from django.conf import settings


class CollabConfig(AppConfig):
    name = "collab"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.signals import user_logged_in
        from django.db.models.signals import post_delete, post_save, pre_save

        from collab import schema  # noqa: F401 - registers the OpenAPI authentication scheme
        from collab.identity import check_mock_identity_allowed
        from collab.json_types import strict_json_scalars
        from collab.models import Notification
        from collab.services import notification_moving, notification_saved
        from collab.throttle import forgive_own_failures
        from collab.tokens import forget_holders_of_changed_user

        check_mock_identity_allowed(
            debug=settings.DEBUG,
            allow_flag=settings.WORKSPACE_ALLOW_MOCK_IDENTITY,
            directory_path=settings.WORKSPACE_USER_DIRECTORY,
            provider_path=settings.WORKSPACE_CURRENT_USER_PROVIDER,
        )
        # A deactivated, demoted, renamed or deleted account's tokens stop acting as before at once.
        user_model = get_user_model()
        post_save.connect(forget_holders_of_changed_user, sender=user_model, dispatch_uid="collab-token-holders-save")
        post_delete.connect(
            forget_holders_of_changed_user, sender=user_model, dispatch_uid="collab-token-holders-delete"
        )

        # A JSON body's text, numbers and booleans are taken only as the types the document says.
        strict_json_scalars()

        # A login forgives only its own username's failures from its own address (not AXES_RESET_ON_SUCCESS).
        user_logged_in.connect(forgive_own_failures, dispatch_uid="collab-forgive-own-failures")

        # The notification poll's ETag (collab.models.InboxVersion) moves with every single-row
        # change too; the services move it themselves for their bulk inserts and updates.
        pre_save.connect(notification_moving, sender=Notification, dispatch_uid="collab-inbox-moving")
        post_save.connect(notification_saved, sender=Notification, dispatch_uid="collab-inbox-saved")
        post_delete.connect(notification_saved, sender=Notification, dispatch_uid="collab-inbox-deleted")

"""URLs of identity and notifications (the spec's paths; pages share them by Accept); the home page
is the project's (`workspace.home`), which reads every area."""

from django.urls import path

from collab import converters as _converters  # noqa: F401 - registers <id:...>
from collab import views

urlpatterns = [
    path("me", views.MeApi.as_view(), name="me"),
    path("me/tokens", views.me_tokens, name="me-tokens"),
    path("me/tokens/<id:token_id>", views.me_token, name="me-token"),
    path("users", views.UserListApi.as_view(), name="users"),
    path("notifications", views.notifications, name="notifications"),
    path("notifications/read-all", views.notifications_read_all, name="notifications-read-all"),
    path("notifications/<id:notification_id>/read", views.notification_read, name="notification-read"),
    path("switch-user", views.switch_user, name="switch-user"),
]

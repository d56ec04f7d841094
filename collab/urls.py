"""URLs of identity and notifications (the spec's paths; pages share them by Accept); the home page
is the project's (`workspace.home`), which reads every area."""

from django.urls import path

from collab import converters as _converters  # noqa: F401 - registers <id:...>
from collab import pages, views
from collab.web import html_or_api

urlpatterns = [
    path("me", views.MeApi.as_view(), name="me"),
    path("me/tokens", html_or_api(page=pages.tokens_page, api=views.ApiTokenListApi), name="me-tokens"),
    # A form cannot send DELETE, so the page's revoke button posts to the same path.
    path("me/tokens/<id:token_id>", html_or_api(page=pages.token_revoke_page, api=views.ApiTokenApi), name="me-token"),
    path("users", views.UserListApi.as_view(), name="users"),
    path(
        "notifications",
        html_or_api(page=pages.notifications_page, api=views.NotificationListApi),
        name="notifications",
    ),
    path(
        "notifications/read-all",
        html_or_api(page=pages.notifications_read_all_page, api=views.NotificationReadAllApi),
        name="notifications-read-all",
    ),
    path(
        "notifications/<id:notification_id>/read",
        html_or_api(page=pages.notification_read_page, api=views.NotificationReadApi),
        name="notification-read",
    ),
    path("switch-user", pages.switch_user, name="switch-user"),
]

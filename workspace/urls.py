"""Root URLs; the whole site is mounted under WORKSPACE_ROOT_PATH (spec Area B.6)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path, reverse_lazy
from django.urls.resolvers import URLPattern, URLResolver
from django.views.generic.base import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from workspace import errors, home
from workspace.health import HealthApi


def site_urlpatterns() -> list[URLPattern | URLResolver]:
    return [
        path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
        path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
        # Before admin/: the staff override endpoints live at /admin/user-resources.
        path("", include("quotas.urls")),
        path("admin/", admin.site.urls),
        path("", home.home_page, name="home"),
        path("healthz", HealthApi.as_view(), name="healthz"),
        # Pages name their icon; this answers what asks the conventional path (a PDF, the API docs).
        path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True), name="favicon"),
        path("api/schema", SpectacularAPIView.as_view(), name="api-schema"),
        path(
            "api/docs",
            SpectacularSwaggerView.as_view(url_name="api-schema", template_name="api/docs.html"),
            name="api-docs",
        ),
        path("api/v1/", include("workspace.workflows.generated")),
        path("", include("collab.urls")),
        path("", include("knowledge.urls")),
        path("", include("workspace.items.urls")),
        path("", include("workspace.agent.urls")),
        path("", include("workspace.workflows.urls")),
        path("", include("workspace.investigations.urls")),
    ]


def build_urlpatterns(root_path: str) -> list[URLPattern | URLResolver]:
    """Everything under `root_path` ("" for the site root, "/ws" for a prefix)."""
    prefix = root_path.strip("/")
    if not prefix:
        return site_urlpatterns()
    return [path(f"{prefix}/", include(site_urlpatterns()))]


urlpatterns = build_urlpatterns(settings.WORKSPACE_ROOT_PATH)

# Admin's "View site" goes to the home page under the root path, not to the host's "/".
admin.site.site_url = reverse_lazy("home")
admin.site.site_header = "Workspace administration"
admin.site.site_title = "Workspace admin"

handler400 = errors.bad_request
handler403 = errors.permission_denied
handler404 = errors.not_found
handler500 = errors.server_error

"""The site's URLs mounted under /ws, as WORKSPACE_ROOT_PATH=/ws would mount them."""

from workspace.urls import build_urlpatterns, handler400, handler403, handler404, handler500  # noqa: F401

urlpatterns = build_urlpatterns("/ws")

"""The site's URLs mounted under /ws, as WORKSPACE_ROOT_PATH=/ws would mount them."""

from workspace.urls import build_urlpatterns

urlpatterns = build_urlpatterns("/ws")

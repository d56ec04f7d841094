"""URLs of the quotas: my-resources (page and JSON) and the staff override endpoints."""

from django.urls import path

from quotas import pages, views

urlpatterns = [
    path("my-resources", pages.my_resources_page, name="my-resources"),
    path("my-resources/live/<str:item_id>/close", pages.my_sandbox_close_page, name="my-resources-close"),
    path("me/resources", views.MyResourcesApi.as_view(), name="me-resources"),
    path("me/resources/live/<str:item_id>", views.MyLiveSandboxApi.as_view(), name="me-resources-live"),
    # Matched before Django admin's own `admin/` (see the root URLs).
    path("admin/user-resources", views.UserResourceListApi.as_view(), name="admin-user-resources"),
    path("admin/user-resources/<str:user_id>", views.UserResourceApi.as_view(), name="admin-user-resource"),
]

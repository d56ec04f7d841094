"""The service's generated routes mounted as the lead will mount them in workspace/urls.py."""

from django.urls import include, path

urlpatterns = [path("api/v1/", include("workspace.workflows.generated"))]

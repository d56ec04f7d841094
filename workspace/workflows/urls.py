"""URLs of a workflow's runs on an item (definitions are crudgen's, under /api/v1/)."""

from django.urls import path

from collab import converters as _converters  # noqa: F401 - registers <id:...>
from collab.web import html_or_api
from workspace.items.urls import ITEM_PATH
from workspace.workflows import pages, views

_WORKFLOW = f"{ITEM_PATH}/workflows/<str:workflow_id>"

urlpatterns = [
    path(_WORKFLOW, html_or_api(page=pages.workflow_page, api=views.WorkflowRunListApi), name="ws-workflow"),
    path(f"{_WORKFLOW}/run", views.WorkflowRunApi.as_view(), name="ws-workflow-run"),
]

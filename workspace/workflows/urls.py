"""URLs of workflows: their pages, and the runs of one on an item (definitions' API is crudgen's, under /api/v1/)."""

from django.urls import path

from collab import converters as _converters  # noqa: F401 - registers <id:...>
from collab.web import html_or_api
from workspace.items.urls import ITEM_PATH
from workspace.workflows import pages, views

_WORKFLOW = f"{ITEM_PATH}/workflows/<str:workflow_id>"
_PAGE = "workflows/<str:workflow_id>"

urlpatterns = [
    path(_WORKFLOW, html_or_api(page=pages.item_workflow_page, api=views.WorkflowRunListApi), name="ws-workflow"),
    path(f"{_WORKFLOW}/run", views.WorkflowRunApi.as_view(), name="ws-workflow-run"),
    path("workflows", pages.workflows_page, name="workflows"),
    path("workflows/new", pages.workflow_new_page, name="workflow-new"),
    path(_PAGE, pages.workflow_page, name="workflow"),
    path(f"{_PAGE}/edit", pages.workflow_edit_page, name="workflow-edit"),
    path(f"{_PAGE}/run", pages.workflow_run_page, name="workflow-run"),
    path(f"{_PAGE}/delete", pages.workflow_delete_page, name="workflow-delete"),
    path(f"{_PAGE}/restore", pages.workflow_restore_page, name="workflow-restore"),
    path(f"{_PAGE}/revisions/<str:revision_id>", pages.workflow_revision_page, name="workflow-revision"),
    path(f"{_PAGE}/revisions/<str:revision_id>/switch", pages.workflow_switch_page, name="workflow-switch"),
]

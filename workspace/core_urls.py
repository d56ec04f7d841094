"""URLs of the workspace core: apps, items, files, exec, sandboxes (pages share paths by Accept)."""

from collections.abc import Callable

from django.urls import path
from rest_framework.views import APIView

from collab.web import html_or_api
from workspace import pages, views
from workspace.chat import views as chat_views
from workspace.investigations import pages as investigation_pages
from workspace.investigations import views as investigation_views
from workspace.workflows import pages as workflow_pages
from workspace.workflows import views as workflow_views

_ITEM = "a/<slug:slug>/items/<int:item_id>"
_WORKFLOW = f"{_ITEM}/workflows/<str:workflow_id>"
_INVESTIGATION = "investigations/<int:investigation_id>"


def _shared(page: Callable, api: type[APIView]) -> Callable:
    """One path for the page and the API; keeps the API class visible to the OpenAPI generator."""
    api_view = api.as_view()
    dispatch = html_or_api(page=page, api=api_view)
    dispatch.cls = api_view.cls
    dispatch.initkwargs = api_view.initkwargs
    return dispatch


urlpatterns = [
    path("a", _shared(pages.apps_page, views.WorkspaceAppListApi), name="ws-apps"),
    path("a/<slug:slug>/items", _shared(pages.items_page, views.ItemListCreateApi), name="ws-items"),
    path(_ITEM, _shared(pages.item_page, views.ItemApi), name="ws-item"),
    path(f"{_ITEM}/exec", views.ItemExecApi.as_view(), name="ws-item-exec"),
    path(f"{_ITEM}/sandbox", _shared(pages.sandbox_close_page, views.ItemSandboxApi), name="ws-item-sandbox"),
    path(f"{_ITEM}/files", views.ItemFileListApi.as_view(), name="ws-item-files"),
    path(f"{_ITEM}/files:batch", views.ItemFileBatchApi.as_view(), name="ws-item-files-batch"),
    path(f"{_ITEM}/upload", pages.upload_page, name="ws-item-upload"),
    path(f"{_ITEM}/files/<path:file_path>", _shared(pages.file_page, views.ItemFileApi), name="ws-item-file"),
    path(f"{_ITEM}/messages", chat_views.ItemMessagesApi.as_view(), name="ws-item-messages"),
    path(_WORKFLOW, _shared(workflow_pages.workflow_page, workflow_views.WorkflowRunListApi), name="ws-workflow"),
    path(f"{_WORKFLOW}/run", workflow_views.WorkflowRunApi.as_view(), name="ws-workflow-run"),
    path(
        "investigations",
        _shared(investigation_pages.investigations_page, investigation_views.InvestigationListCreateApi),
        name="investigations",
    ),
    path(
        _INVESTIGATION,
        _shared(investigation_pages.investigation_page, investigation_views.InvestigationApi),
        name="investigation",
    ),
    path(
        f"{_INVESTIGATION}/mentions",
        investigation_views.InvestigationMentionsApi.as_view(),
        name="investigation-mentions",
    ),
    path(f"{_INVESTIGATION}/status", investigation_views.InvestigationStatusApi.as_view(), name="investigation-status"),
]

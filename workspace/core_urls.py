"""URLs of the workspace core: apps, items, files, exec, sandboxes (pages share paths by Accept)."""

from django.urls import path

from collab import converters as _converters  # noqa: F401 - registers <id:...>
from collab.web import html_or_api
from workspace import pages, views
from workspace.chat import views as chat_views
from workspace.investigations import pages as investigation_pages
from workspace.investigations import views as investigation_views
from workspace.workflows import pages as workflow_pages
from workspace.workflows import views as workflow_views

_ITEM = "a/<slug:slug>/items/<id:item_id>"
_WORKFLOW = f"{_ITEM}/workflows/<str:workflow_id>"
_INVESTIGATION = "investigations/<id:investigation_id>"


urlpatterns = [
    path("me/resources/handovers/<id:item_id>/accept", views.HandoverAnswerApi.as_view(), name="me-handover-accept"),
    path("me/resources/handovers/<id:item_id>/decline", views.HandoverDeclineApi.as_view(), name="me-handover-decline"),
    path("my-resources/handovers/<id:item_id>/<str:answer>", pages.handover_answer_page, name="my-handover-answer"),
    path("a", html_or_api(page=pages.apps_page, api=views.WorkspaceAppListApi), name="ws-apps"),
    path("a/<slug:slug>/items", html_or_api(page=pages.items_page, api=views.ItemListCreateApi), name="ws-items"),
    path(_ITEM, html_or_api(page=pages.item_page, api=views.ItemApi), name="ws-item"),
    path(f"{_ITEM}/exec", views.ItemExecApi.as_view(), name="ws-item-exec"),
    path(
        f"{_ITEM}/sandbox", html_or_api(page=pages.sandbox_close_page, api=views.ItemSandboxApi), name="ws-item-sandbox"
    ),
    path(f"{_ITEM}/files", views.ItemFileListApi.as_view(), name="ws-item-files"),
    path(f"{_ITEM}/files:batch", views.ItemFileBatchApi.as_view(), name="ws-item-files-batch"),
    path(
        f"{_ITEM}/files:move",
        html_or_api(page=pages.file_move_page, api=views.ItemFileMoveApi),
        name="ws-item-files-move",
    ),
    path(
        f"{_ITEM}/files:mkdir",
        html_or_api(page=pages.folder_create_page, api=views.ItemFolderCreateApi),
        name="ws-item-files-mkdir",
    ),
    path(f"{_ITEM}/upload", pages.upload_page, name="ws-item-upload"),
    path(
        f"{_ITEM}/files/<path:file_path>", html_or_api(page=pages.file_page, api=views.ItemFileApi), name="ws-item-file"
    ),
    path(f"{_ITEM}/messages", chat_views.ItemMessagesApi.as_view(), name="ws-item-messages"),
    path(
        _WORKFLOW,
        html_or_api(page=workflow_pages.workflow_page, api=workflow_views.WorkflowRunListApi),
        name="ws-workflow",
    ),
    path(f"{_WORKFLOW}/run", workflow_views.WorkflowRunApi.as_view(), name="ws-workflow-run"),
    path(
        "investigations",
        html_or_api(page=investigation_pages.investigations_page, api=investigation_views.InvestigationListCreateApi),
        name="investigations",
    ),
    path(
        _INVESTIGATION,
        html_or_api(page=investigation_pages.investigation_page, api=investigation_views.InvestigationApi),
        name="investigation",
    ),
    path(
        f"{_INVESTIGATION}/mentions",
        investigation_views.InvestigationMentionsApi.as_view(),
        name="investigation-mentions",
    ),
    path(f"{_INVESTIGATION}/status", investigation_views.InvestigationStatusApi.as_view(), name="investigation-status"),
]

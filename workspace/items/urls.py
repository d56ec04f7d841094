"""URLs of items: apps, items, files, exec, sandboxes, handovers (pages share paths by Accept)."""

from django.urls import path

from collab import converters as _converters  # noqa: F401 - registers <id:...> and <filepath:...>
from collab.web import html_or_api
from workspace.items import pages, views

ITEM_PATH = "a/<slug:slug>/items/<id:item_id>"


urlpatterns = [
    path("me/resources/handovers/<id:item_id>/accept", views.HandoverAnswerApi.as_view(), name="me-handover-accept"),
    path("me/resources/handovers/<id:item_id>/decline", views.HandoverDeclineApi.as_view(), name="me-handover-decline"),
    path("me/resources/handovers/<id:item_id>/return", views.HandoverReturnApi.as_view(), name="me-handover-return"),
    path("my-resources/handovers/<id:item_id>/<str:answer>", pages.handover_answer_page, name="my-handover-answer"),
    path("a", html_or_api(page=pages.apps_page, api=views.WorkspaceAppListApi), name="ws-apps"),
    path("a/<slug:slug>/items", html_or_api(page=pages.items_page, api=views.ItemListCreateApi), name="ws-items"),
    path(ITEM_PATH, html_or_api(page=pages.item_page, api=views.ItemApi), name="ws-item"),
    path(f"{ITEM_PATH}/exec", views.ItemExecApi.as_view(), name="ws-item-exec"),
    path(f"{ITEM_PATH}/execs", views.ItemExecListApi.as_view(), name="ws-item-execs"),
    path(f"{ITEM_PATH}/execs/<str:exec_id>/stop", views.ItemExecStopApi.as_view(), name="ws-item-exec-stop"),
    path(
        f"{ITEM_PATH}/sandbox",
        html_or_api(page=pages.sandbox_close_page, api=views.ItemSandboxApi),
        name="ws-item-sandbox",
    ),
    path(f"{ITEM_PATH}/files", views.ItemFileListApi.as_view(), name="ws-item-files"),
    path(f"{ITEM_PATH}/files:batch", views.ItemFileBatchApi.as_view(), name="ws-item-files-batch"),
    path(
        f"{ITEM_PATH}/files:move",
        html_or_api(page=pages.file_move_page, api=views.ItemFileMoveApi),
        name="ws-item-files-move",
    ),
    path(
        f"{ITEM_PATH}/files:truncate",
        html_or_api(page=pages.file_shrink_page, api=views.ItemFileTruncateApi),
        name="ws-item-files-truncate",
    ),
    path(
        f"{ITEM_PATH}/files:mkdir",
        html_or_api(page=pages.folder_create_page, api=views.ItemFolderCreateApi),
        name="ws-item-files-mkdir",
    ),
    path(f"{ITEM_PATH}/terminals", views.ItemTerminalsApi.as_view(), name="ws-item-terminals"),
    path(f"{ITEM_PATH}/terminals/<str:terminal_id>", views.ItemTerminalApi.as_view(), name="ws-item-terminal"),
    path(
        f"{ITEM_PATH}/terminals/<str:terminal_id>/ws",
        views.ItemTerminalSocketApi.as_view(),
        name="ws-item-terminal-socket",
    ),
    path(f"{ITEM_PATH}/upload", pages.upload_page, name="ws-item-upload"),
    path(
        f"{ITEM_PATH}/files/<filepath:file_path>",
        html_or_api(page=pages.file_page, api=views.ItemFileApi),
        name="ws-item-file",
    ),
]

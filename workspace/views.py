"""Workspace core endpoints (DRF) and the pages that share their paths (chosen by Accept)."""

from __future__ import annotations

import mimetypes
from collections.abc import Iterator

from django.http import FileResponse, HttpRequest
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from collab.errors import ApiError
from collab.serializers import ErrorOutputSerializer
from workspace import selectors, services
from workspace.access import app_or_404, item_for_viewer
from workspace.filestore import CHUNK, read_file, workspace_dir
from workspace.serializers import (
    ExecInputSerializer,
    ExecOutputSerializer,
    FileBatchInputSerializer,
    FileBatchOutputSerializer,
    FileChangeOutputSerializer,
    FileEntryOutputSerializer,
    ItemCreateInputSerializer,
    ItemDetailOutputSerializer,
    ItemListOutputSerializer,
    ItemListQuerySerializer,
    ItemSandboxOutputSerializer,
    ItemUpdateInputSerializer,
    WorkspaceAppOutputSerializer,
)

_ERRORS = {400: ErrorOutputSerializer, 404: ErrorOutputSerializer}


def _viewer_item(request: Request, slug: str, item_id: int):
    return item_for_viewer(slug, item_id, user_id=request.user.id, is_staff=request.user.is_staff)


def _detail(item) -> dict:
    return selectors.item_as_dict(item, detail=selectors.item_detail(item))


class WorkspaceAppListApi(APIView):
    @extend_schema(responses={200: WorkspaceAppOutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response([selectors.app_as_dict(app) for app in selectors.apps()])


class ItemListCreateApi(APIView):
    @extend_schema(
        operation_id="a_items_list",
        parameters=[ItemListQuerySerializer],
        responses={200: ItemListOutputSerializer, **_ERRORS},
    )
    def get(self, request: Request, slug: str) -> Response:
        app_or_404(slug)
        query = ItemListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        limit = query.validated_data["limit"]
        items = selectors.items_of_app(
            app_slug=slug,
            user_id=request.user.id,
            is_staff=request.user.is_staff,
            before=query.validated_data.get("before"),
            limit=limit,
        )
        next_before = items[-1].pk if len(items) == limit else None
        return Response({"results": [selectors.item_as_dict(item) for item in items], "next_before": next_before})

    @extend_schema(request=ItemCreateInputSerializer, responses={201: ItemDetailOutputSerializer, **_ERRORS})
    def post(self, request: Request, slug: str) -> Response:
        app = app_or_404(slug)
        body = ItemCreateInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        item = services.item_create(app=app, user_id=request.user.id, **body.validated_data)
        return Response(_detail(item), status=201)


class ItemApi(APIView):
    @extend_schema(responses={200: ItemDetailOutputSerializer, **_ERRORS})
    def get(self, request: Request, slug: str, item_id: int) -> Response:
        _app, item = _viewer_item(request, slug, item_id)
        return Response(_detail(item))

    @extend_schema(
        request=ItemUpdateInputSerializer,
        responses={200: ItemDetailOutputSerializer, 403: ErrorOutputSerializer, **_ERRORS},
    )
    def patch(self, request: Request, slug: str, item_id: int) -> Response:
        _app, item = _viewer_item(request, slug, item_id)
        body = ItemUpdateInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        item = services.item_update(
            item=item, user_id=request.user.id, is_staff=request.user.is_staff, **body.validated_data
        )
        return Response(_detail(item))


class ItemExecApi(APIView):
    @extend_schema(
        request=ExecInputSerializer,
        responses={200: ExecOutputSerializer, 503: ErrorOutputSerializer, 507: ErrorOutputSerializer, **_ERRORS},
    )
    def post(self, request: Request, slug: str, item_id: int) -> Response:
        app, item = _viewer_item(request, slug, item_id)
        if not isinstance(request.data, dict) or "command" not in request.data:
            raise ApiError(status_code=400, error="invalid_command", detail="The body needs a 'command'.")
        body = ExecInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        outcome = services.item_exec(
            item=item, app=app, command=body.validated_data["command"], timeout=body.validated_data.get("timeout")
        )
        return Response(
            {
                **outcome.result.as_dict(),
                "sandbox_id": outcome.activity.backend_sandbox_id,
                "sandbox_opened": outcome.opened,
            }
        )


class ItemSandboxApi(APIView):
    @extend_schema(responses={200: ItemSandboxOutputSerializer, **_ERRORS})
    def get(self, request: Request, slug: str, item_id: int) -> Response:
        _app, item = _viewer_item(request, slug, item_id)
        sandbox = selectors.sandbox_as_dict(selectors.item_detail(item).sandbox)
        if sandbox is None:
            raise ApiError(status_code=404, error="no_live_sandbox", detail="The item has no live sandbox.")
        return Response(sandbox)

    @extend_schema(responses={204: None, 503: ErrorOutputSerializer, **_ERRORS})
    def delete(self, request: Request, slug: str, item_id: int) -> Response:
        _app, item = _viewer_item(request, slug, item_id)
        services.item_sandbox_close(item=item)
        return Response(status=204)


class ItemFileListApi(APIView):
    @extend_schema(responses={200: FileEntryOutputSerializer(many=True), **_ERRORS})
    def get(self, request: Request, slug: str, item_id: int) -> Response:
        _app, item = _viewer_item(request, slug, item_id)
        return Response([entry.__dict__ for entry in selectors.item_files(item)])


def _request_chunks(request: HttpRequest) -> Iterator[bytes]:
    # Streamed straight to the temp file: uploads are never held whole in memory.
    while chunk := request.read(CHUNK):
        yield chunk


class ItemFileApi(APIView):
    # The stored bytes with a type guessed from the name: any media type may come back.
    @extend_schema(responses={(200, "*/*"): OpenApiTypes.BINARY, **_ERRORS})
    def get(self, request: Request, slug: str, item_id: int, file_path: str) -> FileResponse:
        _app, item = _viewer_item(request, slug, item_id)
        target = read_file(workspace_dir(item.pk), file_path)
        content_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return FileResponse(target.open("rb"), content_type=content_type)

    @extend_schema(
        request={"application/octet-stream": OpenApiTypes.BINARY},
        responses={200: FileChangeOutputSerializer, 413: ErrorOutputSerializer, 507: ErrorOutputSerializer, **_ERRORS},
    )
    def put(self, request: Request, slug: str, item_id: int, file_path: str) -> Response:
        _app, item = _viewer_item(request, slug, item_id)
        change = services.file_write(item=item, path=file_path, chunks=_request_chunks(request._request))
        return Response(change.__dict__)

    @extend_schema(responses={200: FileChangeOutputSerializer, **_ERRORS})
    def delete(self, request: Request, slug: str, item_id: int, file_path: str) -> Response:
        _app, item = _viewer_item(request, slug, item_id)
        return Response(services.file_delete(item=item, path=file_path).__dict__)


class ItemFileBatchApi(APIView):
    @extend_schema(
        request=FileBatchInputSerializer,
        responses={200: FileBatchOutputSerializer, 507: ErrorOutputSerializer, **_ERRORS},
    )
    def post(self, request: Request, slug: str, item_id: int) -> Response:
        _app, item = _viewer_item(request, slug, item_id)
        body = FileBatchInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        report = services.files_batch(item=item, operations=body.validated_data["operations"])
        return Response({"changes": [change.__dict__ for change in report.changes], "delta": report.delta})

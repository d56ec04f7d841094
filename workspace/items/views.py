"""Workspace core endpoints (DRF); the pages that share their paths (chosen by Accept) are in `pages.py`."""

from __future__ import annotations

import codecs
import functools
import mimetypes
from collections.abc import Generator, Iterator
from typing import Any

from django.conf import settings
from django.http import FileResponse, HttpRequest, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from collab import capacity
from collab.actor import actor_of
from collab.api import ServiceApiView, answered_later, created, location_header, websocket_or_426
from collab.bodies import takes_uploads
from collab.capacity import Ticket
from collab.edge import body_of
from collab.errors import DomainError, Invalid, NotFound, UnsupportedType
from collab.events import EventStreamRenderer, event_frame, event_schema, event_stream
from collab.serializers import ErrorOutputSerializer
from collab.waits import Readable, ReleasedAfter, primed
from workspace.items import selectors, services, terminals
from workspace.items.access import ItemRight, app_or_404, item_for_exec
from workspace.items.lifecycle import ExecEvent, ExecOutcome, ExecStarted
from workspace.items.models import Item
from workspace.items.serializers import (
    ExecInputSerializer,
    ExecOutputSerializer,
    ExecStartedOutputSerializer,
    FileBatchInputSerializer,
    FileBatchOutputSerializer,
    FileChangeOutputSerializer,
    FileEntryOutputSerializer,
    FileMoveInputSerializer,
    FileTruncateInputSerializer,
    FolderCreateInputSerializer,
    HandoverAnswerOutputSerializer,
    HandoverReturnOutputSerializer,
    ItemCreateInputSerializer,
    ItemDetailOutputSerializer,
    ItemListOutputSerializer,
    ItemListQuerySerializer,
    ItemSandboxOutputSerializer,
    ItemUpdateInputSerializer,
    RunningExecOutputSerializer,
    TerminalOpenInputSerializer,
    TerminalOutputSerializer,
    WorkspaceAppOutputSerializer,
)
from workspace.items.web import ItemApiView
from workspace.items.workspaces import item_workspace_root
from workspace.sandboxes.filestore import CHUNK, open_read, read_file

_ERRORS = {400: ErrorOutputSerializer, 404: ErrorOutputSerializer}


def _detail(item: Item) -> dict[str, Any]:
    return ItemDetailOutputSerializer(selectors.item_detail(item)).data


class WorkspaceAppListApi(ServiceApiView):
    @extend_schema(responses={200: WorkspaceAppOutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response(WorkspaceAppOutputSerializer(selectors.apps(), many=True).data)


class ItemListCreateApi(ServiceApiView):
    @extend_schema(
        operation_id="a_items_list",
        parameters=[ItemListQuerySerializer],
        responses={200: ItemListOutputSerializer, **_ERRORS},
    )
    def get(self, request: Request, slug: str) -> Response:
        app_or_404(slug)
        query = ItemListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        page = selectors.items_of_app(
            app_slug=slug,
            actor=actor_of(request),
            before=query.validated_data.get("before"),
            limit=query.validated_data["limit"],
        )
        return Response(ItemListOutputSerializer(page).data)

    @extend_schema(
        request=ItemCreateInputSerializer,
        responses={201: ItemDetailOutputSerializer, **_ERRORS},
        parameters=[location_header()],
    )
    def post(self, request: Request, slug: str) -> Response:
        app = app_or_404(slug)
        body = ItemCreateInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        item = services.item_create(app=app, actor=actor_of(request), **body.validated_data)
        return created(_detail(item), url_name="ws-item", slug=item.app_slug, item_id=item.pk)


class ItemApi(ItemApiView):
    needs = {"get": ItemRight.TEND}

    @extend_schema(responses={200: ItemDetailOutputSerializer, **_ERRORS})
    def get(self, request: Request, slug: str, item_id: int) -> Response:
        item = self.item
        return Response(_detail(item))

    @extend_schema(
        request=ItemUpdateInputSerializer,
        responses={200: ItemDetailOutputSerializer, 403: ErrorOutputSerializer, **_ERRORS},
    )
    def patch(self, request: Request, slug: str, item_id: int) -> Response:
        item = self.item
        body = ItemUpdateInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        item = services.item_update(item=item, actor=actor_of(request), **body.validated_data)
        return Response(_detail(item))


def _server_sent_events(events: Iterator[ExecEvent]) -> Iterator[bytes | Readable]:
    """One `started` event ({sandbox_id, sandbox_opened, timeout_seconds}), `output` events
    ({stream, text}) as the command writes, then one `result` (the JSON exec answer) or one
    `error` ({error, detail}). The command's waits pass through (collab.waits)."""
    decoders = {name: codecs.getincrementaldecoder("utf-8")(errors="replace") for name in ("stdout", "stderr")}
    try:
        for event in events:
            if isinstance(event, Readable):
                yield event
            elif isinstance(event, ExecStarted):
                yield event_frame("started", ExecStartedOutputSerializer(event).data)
            elif isinstance(event, ExecOutcome):
                yield event_frame("result", ExecOutputSerializer(event).data)
            elif text := decoders[event[0]].decode(event[1]):
                yield event_frame("output", {"stream": event[0], "text": text})
    except DomainError as exc:
        yield event_frame("error", body_of(exc))
    finally:
        # A client that leaves closes this generator: close the exec's too, so its slot is given back now.
        if isinstance(events, Generator | ReleasedAfter):
            events.close()


def _stoppable(events: Iterator[ExecEvent], ticket: Ticket) -> Iterator[ExecEvent]:
    """`events`, with the command stopped through `ticket` should this server shut down while it runs."""
    for event in events:
        if isinstance(event, ExecStarted) and event.exec_id:
            ticket.stop_with(functools.partial(services.item_exec_stop_for_shutdown, exec_id=event.exec_id))
        yield event


class ItemExecApi(ServiceApiView):
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(
        request=ExecInputSerializer,
        responses={
            (200, "application/json"): ExecOutputSerializer,
            (200, "text/event-stream"): event_schema("started", "output", "result", "error"),
            429: ErrorOutputSerializer,
            500: ErrorOutputSerializer,
            503: ErrorOutputSerializer,
            507: ErrorOutputSerializer,
            **_ERRORS,
        },
        description=(
            "Runs the command in the item's sandbox; a person with WORKSPACE_EXEC_CONCURRENCY_PER_USER "
            "commands running already gets 429 `too_many_running_commands` with Retry-After, and a server "
            "running as many commands as it takes at once 503 `server_busy` with Retry-After. "
            "With `Accept: text/event-stream` the answer streams: "
            "one `started` event ({sandbox_id, sandbox_opened, timeout_seconds}) once the sandbox is ready, "
            "`output` events ({stream, text}) while it runs, then one `result` event (this JSON answer) "
            "or an `error` event. Refusals (400, 507...) come back as JSON before any event."
        ),
    )
    def post(self, request: Request, slug: str, item_id: int) -> HttpResponse:
        app, item, live_row = item_for_exec(slug, item_id, actor=actor_of(request))
        if not isinstance(request.data, dict) or "command" not in request.data:
            raise Invalid(error="invalid_command", detail="The body needs a 'command'.")
        body = ExecInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        command, timeout = body.validated_data["command"], body.validated_data.get("timeout")
        run = {"item": item, "app": app, "command": command, "actor": actor_of(request), "timeout": timeout}
        # The command waits on the event loop, not a thread; this process runs only so many at once.
        ticket = capacity.running_commands.ticket()
        try:
            events = _stoppable(services.item_exec_events(**run, live_row=live_row), ticket)
            if request.accepted_renderer.media_type == EventStreamRenderer.media_type:
                # Its refusals (429, 507, 409) are the first step's: answered as JSON, before any event.
                started = primed(events)

                def given_back() -> None:
                    # The command was started by then: closing the stream unread stops it too.
                    started.close()
                    ticket.release()

                return event_stream(ReleasedAfter(_server_sent_events(started), given_back))
            return answered_later(
                self,
                request,
                events,
                respond=lambda outcome: Response(ExecOutputSerializer(outcome).data),
                release=ticket.release,
            )
        except BaseException:
            ticket.release()
            raise


class ItemExecListApi(ItemApiView):
    @extend_schema(
        responses={200: RunningExecOutputSerializer(many=True), 403: ErrorOutputSerializer, **_ERRORS},
        description="The commands running in the item's sandbox now (from the terminal or this API), oldest first.",
    )
    def get(self, request: Request, slug: str, item_id: int) -> Response:
        item = self.item
        return Response(RunningExecOutputSerializer(selectors.running_execs(item), many=True).data)


class ItemExecStopApi(ItemApiView):
    @extend_schema(
        request=None,
        responses={200: RunningExecOutputSerializer, 403: ErrorOutputSerializer, 503: ErrorOutputSerializer, **_ERRORS},
        description=(
            "Stops one running command (its `exec_id`, from the stream's `started` event or the list) and "
            "nothing else: the sandbox and whatever else runs in it go on. Its exec result then has `reason` "
            "`stopped` and names who stopped it. For its requester and staff (403 `not_your_command` for "
            "others); a command not running is 404 `no_running_command`."
        ),
    )
    def post(self, request: Request, slug: str, item_id: int, exec_id: str) -> Response:
        item = self.item
        stopped = services.item_exec_stop(item=item, exec_id=exec_id, actor=actor_of(request))
        return Response(RunningExecOutputSerializer(stopped).data)


class ItemSandboxApi(ItemApiView):
    needs = {"get": ItemRight.TEND, "delete": ItemRight.TEND}

    @extend_schema(responses={200: ItemSandboxOutputSerializer, **_ERRORS})
    def get(self, request: Request, slug: str, item_id: int) -> Response:
        item = self.item
        sandbox = selectors.item_detail(item).sandbox
        if sandbox is None:
            raise NotFound(error="no_live_sandbox", detail="The item has no live sandbox.")
        return Response(ItemSandboxOutputSerializer(sandbox).data)

    @extend_schema(responses={204: None, 503: ErrorOutputSerializer, **_ERRORS})
    def delete(self, request: Request, slug: str, item_id: int) -> Response:
        item = self.item
        services.item_sandbox_close(item=item, actor=actor_of(request))
        return Response(status=204)


class ItemFileListApi(ItemApiView):
    needs = {"get": ItemRight.TEND}

    @extend_schema(responses={200: FileEntryOutputSerializer(many=True), **_ERRORS})
    def get(self, request: Request, slug: str, item_id: int) -> Response:
        item = self.item
        return Response(FileEntryOutputSerializer(selectors.item_files(item), many=True).data)


def _request_chunks(request: HttpRequest) -> Iterator[bytes]:
    # Streamed straight to the temp file: uploads are never held whole in memory.
    while chunk := request.read(CHUNK):
        yield chunk


# What a file PUT may say its body is: the document's one media type, or nothing (a script that
# sends bytes without naming them). A form's type (`curl --data-binary` without `-H`) or a JSON one
# would be read as bytes all the same, but the document would not say so.
FILE_BODY_TYPES = ("", "application/octet-stream")


def _bytes_only(request: Request) -> None:
    said = request.META.get("CONTENT_TYPE", "").split(";")[0].strip().lower()
    if said not in FILE_BODY_TYPES:
        raise UnsupportedType(
            error="unsupported_media_type",
            detail=f"A file's bytes are sent as application/octet-stream (or with no Content-Type), not {said[:100]}.",
        )


@takes_uploads(lambda: settings.WORKSPACE_MAX_FILE_BYTES)
class ItemFileApi(ItemApiView):
    needs = {"delete": ItemRight.TEND}

    reads_raw_body = True  # PUT streams the body to the workspace (`_request_chunks`)

    # The stored bytes, typed by a guess from the name (`text/plain`, `image/png`...), else
    # `application/octet-stream`. That one is listed first: client generators read a binary body from
    # it, and skip the whole response when they meet only `*/*` (openapi-python-client does).
    @extend_schema(
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            (200, "*/*"): OpenApiTypes.BINARY,
            **_ERRORS,
        }
    )
    def get(self, request: Request, slug: str, item_id: int, file_path: str) -> FileResponse:
        item = self.item
        root = item_workspace_root(item)
        target = read_file(root, file_path)
        content_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return FileResponse(open_read(root, target), content_type=content_type)

    @extend_schema(
        request={"application/octet-stream": OpenApiTypes.BINARY},
        responses={
            200: FileChangeOutputSerializer,
            413: ErrorOutputSerializer,
            415: ErrorOutputSerializer,
            507: ErrorOutputSerializer,
            **_ERRORS,
        },
        description=(
            "The body is the file's bytes, sent as `application/octet-stream` (or with no Content-Type); "
            "any other media type is 415 `unsupported_media_type` and nothing is written."
        ),
    )
    def put(self, request: Request, slug: str, item_id: int, file_path: str) -> Response:
        item = self.item
        _bytes_only(request)
        change = services.file_write(item=item, path=file_path, chunks=_request_chunks(request._request))
        return Response(FileChangeOutputSerializer(change).data)

    @extend_schema(responses={200: FileChangeOutputSerializer, **_ERRORS})
    def delete(self, request: Request, slug: str, item_id: int, file_path: str) -> Response:
        item = self.item
        return Response(FileChangeOutputSerializer(services.file_delete(item=item, path=file_path)).data)


class ItemFileMoveApi(ItemApiView):
    @extend_schema(
        request=FileMoveInputSerializer,
        responses={200: FileChangeOutputSerializer, 409: ErrorOutputSerializer, **_ERRORS},
        description="Renames or moves a file or folder inside the workspace; an existing target is a 409.",
    )
    def post(self, request: Request, slug: str, item_id: int) -> Response:
        item = self.item
        body = FileMoveInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        change = services.file_move(item=item, **body.validated_data)
        return Response(FileChangeOutputSerializer(change).data)


class ItemFileTruncateApi(ItemApiView):
    needs = {"post": ItemRight.TEND}

    @extend_schema(
        request=FileTruncateInputSerializer,
        responses={200: FileChangeOutputSerializer, 403: ErrorOutputSerializer, **_ERRORS},
        description=(
            "Keeps a file's first `size` bytes (0 empties it): a shrink, allowed even over quota, and the "
            "one file change the payer of someone else's item may make besides deleting (they never read "
            "or write its content). A size above the file's is 400 `not_a_shrink`."
        ),
    )
    def post(self, request: Request, slug: str, item_id: int) -> Response:
        item = self.item
        body = FileTruncateInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(FileChangeOutputSerializer(services.file_truncate(item=item, **body.validated_data)).data)


class ItemFolderCreateApi(ItemApiView):
    @extend_schema(
        request=FolderCreateInputSerializer,
        responses={201: FileChangeOutputSerializer, 409: ErrorOutputSerializer, **_ERRORS},
    )
    def post(self, request: Request, slug: str, item_id: int) -> Response:
        item = self.item
        body = FolderCreateInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        change = services.folder_create(item=item, path=body.validated_data["path"])
        return Response(FileChangeOutputSerializer(change).data, status=201)


class ItemFileBatchApi(ItemApiView):
    @extend_schema(
        request=FileBatchInputSerializer,
        responses={200: FileBatchOutputSerializer, 507: ErrorOutputSerializer, **_ERRORS},
    )
    def post(self, request: Request, slug: str, item_id: int) -> Response:
        item = self.item
        body = FileBatchInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        report = services.files_batch(item=item, operations=body.validated_data["operations"])
        return Response(FileBatchOutputSerializer(report).data)


class HandoverAnswerApi(ServiceApiView):
    """The addressee's answer to a request to pay for an item (docs/ARCHITECTURE.md §5)."""

    accept = True

    @extend_schema(request=None, responses={200: HandoverAnswerOutputSerializer, **_ERRORS})
    def post(self, request: Request, item_id: int) -> Response:
        item = services.item_handover_answer(item_id=item_id, actor=actor_of(request), accept=self.accept)
        answer = {"item_id": item.pk, "owner": item.payer, "accepted": self.accept}
        return Response(HandoverAnswerOutputSerializer(answer).data)


class HandoverDeclineApi(HandoverAnswerApi):
    accept = False


class HandoverReturnApi(ServiceApiView):
    """The payer of someone else's item hands the bill back to its creator (docs/ARCHITECTURE.md §5)."""

    @extend_schema(
        request=None,
        responses={200: HandoverReturnOutputSerializer, **_ERRORS},
        description="Ends an accepted handover: the item's creator pays again. For the payer, the creator and "
        "staff; anyone else, or an item its creator pays for already, is 404 `no_handover`.",
    )
    def post(self, request: Request, item_id: int) -> Response:
        item = services.item_bill_return(item_id=item_id, actor=actor_of(request))
        return Response(HandoverReturnOutputSerializer({"item_id": item.pk, "owner": item.payer}).data)


class ItemTerminalsApi(ItemApiView):
    @extend_schema(responses={200: TerminalOutputSerializer(many=True), **_ERRORS})
    def get(self, request: Request, slug: str, item_id: int) -> Response:
        rows = terminals.terminal_scope(item=self.item, actor=actor_of(request))
        return Response(TerminalOutputSerializer(rows, many=True, context={"request": request}).data)

    @extend_schema(
        request=TerminalOpenInputSerializer,
        responses={
            201: TerminalOutputSerializer,
            409: ErrorOutputSerializer,
            429: ErrorOutputSerializer,
            503: ErrorOutputSerializer,
            507: ErrorOutputSerializer,
            **_ERRORS,
        },
        description=(
            "Opens an interactive shell in the item's sandbox (opened through the quota gate when none is live), "
            "for the caller alone; at most WORKSPACE_TERMINALS_PER_USER open at once (429 `too_many_terminals`). "
            "Connect to its `ws_url`; it runs on until it is closed (DELETE) or its sandbox is."
        ),
    )
    def post(self, request: Request, slug: str, item_id: int) -> Response:
        body = request.data if isinstance(request.data, dict) else {}
        terminal = terminals.terminal_open(
            item=self.item, app=self.app, actor=actor_of(request), rows=body.get("rows", 24), cols=body.get("cols", 80)
        )
        data = TerminalOutputSerializer(terminal, context={"request": request}).data
        return created(data, url_name="ws-item-terminal", slug=slug, item_id=item_id, terminal_id=terminal.terminal_id)


class ItemTerminalApi(ItemApiView):
    @extend_schema(request=None, responses={204: None, **_ERRORS})
    def delete(self, request: Request, slug: str, item_id: int, terminal_id: str) -> Response:
        terminals.terminal_close(item=self.item, terminal_id=terminal_id, actor=actor_of(request))
        return Response(status=204)


class ItemTerminalSocketApi(ItemApiView):
    @extend_schema(
        responses={426: ErrorOutputSerializer, **_ERRORS},
        description=(
            "The terminal's WebSocket (see `ws_url`): a GET that is no WebSocket handshake is 426. "
            "`?since=<offset>` replays the kept output from that offset."
        ),
    )
    def get(self, request: Request, slug: str, item_id: int, terminal_id: str) -> HttpResponse:
        since = request.query_params.get("since", "0")
        socket = terminals.terminal_socket(
            item=self.item, terminal_id=terminal_id, actor=actor_of(request), since=since
        )
        return websocket_or_426(request, socket.attach)

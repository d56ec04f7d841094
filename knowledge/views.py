"""DRF endpoints of the knowledge base (docs/ARCHITECTURE.md §6): parse, call one service or selector, answer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db import DataError
from django.http import Http404, StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers as drf_serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from collab.actor import actor_of
from collab.api import ServiceApiView, created, location_header
from collab.bodies import takes_uploads
from collab.capacity import runs_long
from collab.edge import refusal_body
from collab.errors import DomainError
from collab.events import EventStreamRenderer, event_frame, event_schema, event_stream, frames_to_the_end
from collab.serializers import ErrorOutputSerializer
from crudgen.parsers import BoundedJSONParser
from knowledge import selectors, services
from knowledge.access import chat_for, collection_for, document_for
from knowledge.answers import Restart
from knowledge.serializers import (
    KbChatCopyInputSerializer,
    KbChatCreateInputSerializer,
    KbChatDetailOutputSerializer,
    KbChatExchangeOutputSerializer,
    KbChatMessageInputSerializer,
    KbChatOutputSerializer,
    KbChatRenameInputSerializer,
    KbChatSharedWithOutputSerializer,
    KbChatShareInputSerializer,
    KbChunkOutputSerializer,
    KbChunksQuerySerializer,
    KbCollectionCreateInputSerializer,
    KbCollectionOutputSerializer,
    KbCollectionUpdateInputSerializer,
    KbDocumentAcceptedOutputSerializer,
    KbDocumentOutputSerializer,
    KbDocumentRenameInputSerializer,
    KbDocumentUploadInputSerializer,
    KbWritersInputSerializer,
    KbWritersOutputSerializer,
)

_ERRORS = {400: ErrorOutputSerializer, 404: ErrorOutputSerializer}


def _valid(serializer_class: type[drf_serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class KbCollectionListApi(ServiceApiView):
    @extend_schema(responses={200: KbCollectionOutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response(KbCollectionOutputSerializer(selectors.collections_with_counts(), many=True).data)

    @extend_schema(
        request=KbCollectionCreateInputSerializer,
        responses={201: KbCollectionOutputSerializer, **_ERRORS},
        parameters=[location_header()],
    )
    def post(self, request: Request) -> Response:
        data = _valid(KbCollectionCreateInputSerializer, request.data)
        collection = services.collection_create(actor=actor_of(request), **data)
        row = selectors.collection_with_counts(collection_id=collection.id)
        return created(KbCollectionOutputSerializer(row).data, url_name="kb-collection", collection_id=collection.id)


class KbCollectionDetailApi(ServiceApiView):
    parser_classes = [BoundedJSONParser]

    @extend_schema(responses={200: KbCollectionOutputSerializer, 404: ErrorOutputSerializer})
    def get(self, request: Request, collection_id: str) -> Response:
        return Response(KbCollectionOutputSerializer(_collection_row(collection_id)).data)

    @extend_schema(
        request=KbCollectionUpdateInputSerializer,
        responses={200: KbCollectionOutputSerializer, 403: ErrorOutputSerializer, **_ERRORS},
        description="Writers of the collection only: renames it, and changes its description when one is given.",
    )
    def patch(self, request: Request, collection_id: str) -> Response:
        data = _valid(KbCollectionUpdateInputSerializer, request.data)
        services.collection_rename(collection_id=collection_id, actor=actor_of(request), **data)
        return Response(KbCollectionOutputSerializer(_collection_row(collection_id)).data)

    @extend_schema(
        request=None,
        responses={204: None, 403: ErrorOutputSerializer, **_ERRORS},
        description="The collection's creator only: deletes it with its documents, their chunks and search-index "
        "rows. Chats that searched it keep their answers; citation events stay in the log.",
    )
    def delete(self, request: Request, collection_id: str) -> Response:
        services.collection_delete(collection_id=collection_id, actor=actor_of(request))
        return Response(status=204)


def _collection_row(collection_id: str) -> selectors.CollectionRow:
    row = selectors.collection_with_counts(collection_id=collection_id)
    if row is None:
        raise Http404("No such collection.")
    return row


@takes_uploads(lambda: settings.KNOWLEDGE_MAX_UPLOAD_BYTES)
class KbCollectionDocumentsApi(ServiceApiView):
    # An upload: multipart only (a file is not JSON, and a form-encoded body cannot carry one).
    parser_classes = [MultiPartParser]

    @extend_schema(responses={200: KbDocumentOutputSerializer(many=True), **_ERRORS})
    def get(self, request: Request, collection_id: str) -> Response:
        collection_for(collection_id, actor=actor_of(request))
        rows = selectors.documents_with_counts(collection_id=collection_id)
        return Response(KbDocumentOutputSerializer(rows, many=True).data)

    @extend_schema(
        request={"multipart/form-data": KbDocumentUploadInputSerializer},
        responses={
            202: KbDocumentAcceptedOutputSerializer,
            413: ErrorOutputSerializer,
            415: ErrorOutputSerializer,
            **_ERRORS,
        },
        parameters=[location_header(202)],
        description="Stores the file and queues its ingest for the worker; the same filename replaces that document. "
        "`Location` names the document, whose `status` says when its ingest is done.",
    )
    def post(self, request: Request, collection_id: str) -> Response:
        upload = _valid(KbDocumentUploadInputSerializer, request.data)["file"]
        document = services.document_upload(
            collection_id=collection_id,
            actor=actor_of(request),
            filename=upload.name or "",
            content_type=upload.content_type or "",
            data=upload,
        )
        data = KbDocumentAcceptedOutputSerializer(document).data
        return created(data, url_name="kb-document", status=202, document_id=document.id)


class KbDocumentDetailApi(ServiceApiView):
    parser_classes = [BoundedJSONParser]

    @extend_schema(responses={200: KbDocumentOutputSerializer, 404: ErrorOutputSerializer})
    def get(self, request: Request, document_id: str) -> Response:
        row = selectors.document_with_counts(document_id=document_id)
        if row is None:
            raise Http404("No such document.")
        return Response(KbDocumentOutputSerializer(row).data)

    @extend_schema(
        request=KbDocumentRenameInputSerializer,
        responses={200: KbDocumentOutputSerializer, 403: ErrorOutputSerializer, 409: ErrorOutputSerializer, **_ERRORS},
        description="Writers of the collection only: renames the document.",
    )
    def patch(self, request: Request, document_id: str) -> Response:
        filename = _valid(KbDocumentRenameInputSerializer, request.data)["filename"]
        services.document_rename(document_id=document_id, actor=actor_of(request), filename=filename)
        return Response(KbDocumentOutputSerializer(selectors.document_with_counts(document_id=document_id)).data)

    @extend_schema(
        request=None,
        responses={204: None, 403: ErrorOutputSerializer, 404: ErrorOutputSerializer},
        description="Writers of the collection only: deletes the document and its chunks; citations stay counted.",
    )
    def delete(self, request: Request, document_id: str) -> Response:
        services.document_delete(document_id=document_id, actor=actor_of(request))
        return Response(status=204)


class KbCollectionWritersApi(ServiceApiView):
    parser_classes = [BoundedJSONParser]

    @extend_schema(responses={200: KbWritersOutputSerializer, 404: ErrorOutputSerializer})
    def get(self, request: Request, collection_id: str) -> Response:
        writers = services.collection_writer_ids(collection_for(collection_id, actor=actor_of(request)))
        return Response(KbWritersOutputSerializer({"writers": writers}).data)

    @extend_schema(
        request=KbWritersInputSerializer,
        responses={200: KbWritersOutputSerializer, 403: ErrorOutputSerializer, **_ERRORS},
        description="The collection's creator only; unknown ids are refused by name and nothing changes.",
    )
    def post(self, request: Request, collection_id: str) -> Response:
        user_ids = _valid(KbWritersInputSerializer, request.data)["user_ids"]
        writers = services.collection_writers_add(
            collection_id=collection_id, actor=actor_of(request), user_ids=user_ids
        )
        return Response(KbWritersOutputSerializer({"writers": writers}).data)


class KbCollectionWriterApi(ServiceApiView):
    @extend_schema(request=None, responses={204: None, 403: ErrorOutputSerializer, 404: ErrorOutputSerializer})
    def delete(self, request: Request, collection_id: str, user_id: str) -> Response:
        services.collection_writer_remove(collection_id=collection_id, actor=actor_of(request), writer_id=user_id)
        return Response(status=204)


class KbDocumentChunksApi(ServiceApiView):
    """`/kb/documents/<doc>/chunks`; the spec also names a query form, served by the subclass below."""

    @extend_schema(operation_id="kb_document_chunks", responses={200: KbChunkOutputSerializer(many=True), **_ERRORS})
    def get(self, request: Request, document_id: str) -> Response:
        document_for(document_id, actor=actor_of(request))
        return Response(KbChunkOutputSerializer(selectors.chunks_with_counts(document_id=document_id), many=True).data)


class KbDocumentChunksByQueryApi(KbDocumentChunksApi):
    """`/kb/documents/chunks?id=<doc>`."""

    @extend_schema(
        operation_id="kb_document_chunks_by_query",
        parameters=[KbChunksQuerySerializer],
        responses={200: KbChunkOutputSerializer(many=True), **_ERRORS},
    )
    def get(self, request: Request) -> Response:
        return super().get(request, _valid(KbChunksQuerySerializer, request.query_params)["id"])


class KbChatListApi(ServiceApiView):
    parser_classes = [BoundedJSONParser]

    @extend_schema(responses={200: KbChatOutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response(KbChatOutputSerializer(selectors.chats_for_reader(actor=actor_of(request)), many=True).data)

    @extend_schema(
        request=KbChatCreateInputSerializer,
        responses={201: KbChatDetailOutputSerializer, **_ERRORS},
        parameters=[location_header()],
    )
    def post(self, request: Request) -> Response:
        data = _valid(KbChatCreateInputSerializer, request.data)
        chat = services.chat_create(actor=actor_of(request), **data)
        detail = KbChatDetailOutputSerializer(selectors.chat_detail(chat=chat)).data
        return created(detail, url_name="kb-chat", chat_id=chat.id)


class KbChatDetailApi(ServiceApiView):
    parser_classes = [BoundedJSONParser]

    @extend_schema(responses={200: KbChatDetailOutputSerializer, 404: ErrorOutputSerializer})
    def get(self, request: Request, chat_id: str) -> Response:
        chat = chat_for(chat_id, actor=actor_of(request))
        return Response(KbChatDetailOutputSerializer(selectors.chat_detail(chat=chat)).data)

    @extend_schema(
        request=KbChatRenameInputSerializer,
        responses={200: KbChatOutputSerializer, 403: ErrorOutputSerializer, **_ERRORS},
        description="Owner only; a shared reader gets 403 `read_only_share`.",
    )
    def patch(self, request: Request, chat_id: str) -> Response:
        title = _valid(KbChatRenameInputSerializer, request.data)["title"]
        chat = services.chat_rename(chat_id=chat_id, actor=actor_of(request), title=title)
        return Response(KbChatOutputSerializer(selectors.chat_summary(chat=chat)).data)

    @extend_schema(
        request=None,
        responses={204: None, 403: ErrorOutputSerializer, **_ERRORS},
        description="Owner only: deletes the chat, its messages and its shares. The citation events its answers "
        "wrote stay in the log, so citation counts do not drop.",
    )
    def delete(self, request: Request, chat_id: str) -> Response:
        services.chat_delete(chat_id=chat_id, actor=actor_of(request))
        return Response(status=204)


class KbChatCopyApi(ServiceApiView):
    parser_classes = [BoundedJSONParser]

    @extend_schema(
        request=KbChatCopyInputSerializer,
        responses={201: KbChatDetailOutputSerializer, **_ERRORS},
        parameters=[location_header()],
        description="The owner or a shared reader copies the chat into a new chat of their own (same collections, "
        "same messages, no readers) and can ask there; the original is unchanged and nothing is cited anew.",
    )
    def post(self, request: Request, chat_id: str) -> Response:
        title = _valid(KbChatCopyInputSerializer, request.data)["title"]
        chat = services.chat_copy(chat_id=chat_id, actor=actor_of(request), title=title)
        detail = KbChatDetailOutputSerializer(selectors.chat_detail(chat=chat)).data
        return created(detail, url_name="kb-chat", chat_id=chat.id)


def answer_event_frames(events: Iterator[str | Restart | services.ChatExchange]) -> Iterator[bytes]:
    """`delta` events ({text}) as the answer is written, `restart` ({detail}) when the model failed
    midway and the fallback follows, then `answer` (the stored exchange, as the JSON answer has it)
    or `error` ({error, detail}). A reader who leaves mid-answer does not stop it: it is finished and
    stored (within the provider's timeout), so the question is never lost with the page.
    """

    def frames(events: Iterator[str | Restart | services.ChatExchange]) -> Iterator[bytes]:
        for event in events:
            if isinstance(event, str):
                yield event_frame("delta", {"text": event})
            elif isinstance(event, Restart):
                yield event_frame("restart", {"detail": event.reason})
            else:
                yield event_frame("answer", KbChatExchangeOutputSerializer(event).data)

    return frames_to_the_end(events, frames, refusals=(DomainError, Http404, DataError), refusal_body=refusal_body)


@runs_long
class KbChatMessagesApi(ServiceApiView):
    parser_classes = [BoundedJSONParser]
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(
        request=KbChatMessageInputSerializer,
        responses={
            (201, "application/json"): KbChatExchangeOutputSerializer,
            (200, "text/event-stream"): event_schema("delta", "restart", "answer", "error"),
            403: ErrorOutputSerializer,
            429: ErrorOutputSerializer,
            **_ERRORS,
        },
        description=(
            "Owner only; a shared reader gets 403 `read_only_share` and nothing is stored. The question and "
            "its answer are stored together once the answer is done. With `Accept: text/event-stream` the "
            "answer streams as it is written: `delta` events ({text}), a `restart` ({detail}) if the model "
            "fails midway and the quoted fallback follows, then one `answer` event (this JSON answer) or an "
            "`error` event. Refusals (400, 403, 404) come back as JSON before any event, and so does 429 "
            "`too_many_running_commands` (with Retry-After) when a model writes the answers and the person already "
            "runs as many commands or model answers at once as they may (WORKSPACE_EXEC_CONCURRENCY_PER_USER)."
        ),
    )
    def post(self, request: Request, chat_id: str) -> Response | StreamingHttpResponse:
        content = _valid(KbChatMessageInputSerializer, request.data)["content"]
        if request.accepted_renderer.media_type == EventStreamRenderer.media_type:
            question = services.chat_question_check(chat_id=chat_id, actor=actor_of(request), content=content)
            return event_stream(answer_event_frames(services.chat_answer_events(question)))
        exchange = services.chat_message_send(chat_id=chat_id, actor=actor_of(request), content=content)
        return Response(KbChatExchangeOutputSerializer(exchange).data, status=201)


class KbChatShareApi(ServiceApiView):
    parser_classes = [BoundedJSONParser]

    @extend_schema(
        request=KbChatShareInputSerializer,
        responses={200: KbChatSharedWithOutputSerializer, 403: ErrorOutputSerializer, **_ERRORS},
        description="Owner only; unknown ids are refused by name and nothing changes.",
    )
    def post(self, request: Request, chat_id: str) -> Response:
        user_ids = _valid(KbChatShareInputSerializer, request.data)["user_ids"]
        shared_with = services.chat_share(chat_id=chat_id, actor=actor_of(request), user_ids=user_ids)
        return Response(KbChatSharedWithOutputSerializer({"shared_with": shared_with}).data)


class KbChatUnshareApi(ServiceApiView):
    @extend_schema(request=None, responses={204: None, 403: ErrorOutputSerializer, 404: ErrorOutputSerializer})
    def delete(self, request: Request, chat_id: str, user_id: str) -> Response:
        services.chat_unshare(chat_id=chat_id, actor=actor_of(request), reader_id=user_id)
        return Response(status=204)

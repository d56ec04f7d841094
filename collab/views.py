"""Identity, notification and personal-token endpoints (the pages that show them are in `pages.py`)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from collab import selectors, services, tokens
from collab.actor import actor_of
from collab.api import ServiceApiView, created, location_header
from collab.errors import NotAuthenticated
from collab.identity import get_user_directory
from collab.serializers import (
    ApiTokenCreateInputSerializer,
    ApiTokenIssuedOutputSerializer,
    ApiTokenOutputSerializer,
    ErrorOutputSerializer,
    NotificationInboxOutputSerializer,
    NotificationInboxQuerySerializer,
    NotificationOutputSerializer,
    NotificationsMarkedOutputSerializer,
    UserOutputSerializer,
)


class MeApi(ServiceApiView):
    @extend_schema(responses={200: UserOutputSerializer, 401: ErrorOutputSerializer})
    def get(self, request: Request) -> Response:
        user = get_user_directory().get(actor_of(request).user_id)
        if user is None:
            raise NotAuthenticated(error="unknown_user", detail="You are not in the user directory.")
        return Response(UserOutputSerializer(user).data)


class UserListApi(ServiceApiView):
    @extend_schema(responses={200: UserOutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response(UserOutputSerializer(get_user_directory().all(), many=True).data)


class NotificationListApi(ServiceApiView):
    @extend_schema(
        parameters=[
            NotificationInboxQuerySerializer,
            OpenApiParameter(
                "If-None-Match",
                str,
                OpenApiParameter.HEADER,
                description="The `ETag` of the last answer: when nothing changed since, 304 with no body.",
            ),
            OpenApiParameter(
                "ETag", str, OpenApiParameter.HEADER, response=[200, 304], description="The state of this inbox page."
            ),
            OpenApiParameter(
                "X-Poll-Interval",
                int,
                OpenApiParameter.HEADER,
                response=[200, 304],
                description="Seconds to wait before asking again.",
            ),
        ],
        responses={200: NotificationInboxOutputSerializer, 304: None, 400: ErrorOutputSerializer},
        description="The caller's notifications, unread first, then newest. Poll with `If-None-Match`.",
    )
    def get(self, request: Request) -> Response:
        if request.query_params:
            query = NotificationInboxQuerySerializer(data=request.query_params)
            query.is_valid(raise_exception=True)
            limit, shown = query.validated_data["limit"], query.shown()
        else:  # the bell's poll, every 30 s from every open page: the defaults, without a serializer
            limit, shown = selectors.INBOX_DEFAULT_LIMIT, selectors.EVERYTHING
        state = selectors.inbox_state(user_id=actor_of(request).user_id)
        etag = state.etag(limit=limit, shown=shown)
        if etag in _if_none_match(request):
            response = Response(status=304)
        else:
            inbox = selectors.inbox(user_id=actor_of(request).user_id, limit=limit, state=state, shown=shown)
            response = Response(NotificationInboxOutputSerializer(inbox).data)
        response["ETag"] = etag
        response["Cache-Control"] = "private, no-cache"
        response["X-Poll-Interval"] = str(_poll_seconds())
        return response


class NotificationReadApi(ServiceApiView):
    @extend_schema(request=None, responses={200: NotificationOutputSerializer, 404: ErrorOutputSerializer})
    def post(self, request: Request, notification_id: int) -> Response:
        notification = services.notification_mark_read(notification_id=notification_id, actor=actor_of(request))
        return Response(NotificationOutputSerializer(notification).data)


class NotificationReadAllApi(ServiceApiView):
    @extend_schema(request=None, responses={200: NotificationsMarkedOutputSerializer})
    def post(self, request: Request) -> Response:
        marked = services.notifications_mark_all_read(user_id=actor_of(request).user_id)
        return Response(NotificationsMarkedOutputSerializer({"marked": marked}).data)


def _if_none_match(request: Request) -> set[str]:
    raw = request.headers.get("If-None-Match", "")
    return {tag.strip().removeprefix("W/") for tag in raw.split(",") if tag.strip()}


def _poll_seconds() -> int:
    from django.conf import settings

    return settings.WORKSPACE_NOTIFICATION_POLL_SECONDS


class ApiTokenListApi(ServiceApiView):
    @extend_schema(responses={200: ApiTokenOutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response(ApiTokenOutputSerializer(tokens.tokens_of(actor=actor_of(request)), many=True).data)

    @extend_schema(
        request=ApiTokenCreateInputSerializer,
        responses={
            201: ApiTokenIssuedOutputSerializer,
            400: ErrorOutputSerializer,
            403: ErrorOutputSerializer,
            409: ErrorOutputSerializer,
        },
        parameters=[location_header()],
        description="Creates a personal token; the answer is the only time the token itself is shown.",
    )
    def post(self, request: Request) -> Response:
        body = ApiTokenCreateInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        issued = tokens.token_create(
            actor=actor_of(request),
            name=body.validated_data["name"],
            via_token=request.identity.source == "token",
        )
        return created(ApiTokenIssuedOutputSerializer(issued).data, url_name="me-token", token_id=issued.row.pk)


class ApiTokenApi(ServiceApiView):
    @extend_schema(request=None, responses={200: ApiTokenOutputSerializer, 404: ErrorOutputSerializer})
    def delete(self, request: Request, token_id: int) -> Response:
        revoked = tokens.token_revoke(token_id=token_id, actor=actor_of(request))
        return Response(ApiTokenOutputSerializer(revoked).data)

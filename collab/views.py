"""Identity and notification endpoints, and the pages that show them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from collab import selectors, services, tokens
from collab.actor import actor_of
from collab.api import ServiceApiView, created, location_header
from collab.edge import flattened_detail
from collab.errors import DomainError, NotAuthenticated
from collab.identity import get_user_directory, mock_identity_enabled
from collab.middleware import MOCK_SESSION_KEY
from collab.models import Notification
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
from collab.web import html_or_api, identity_required, safe_next


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
        notification = services.notification_mark_read(
            notification_id=notification_id, user_id=actor_of(request).user_id
        )
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


@dataclass(frozen=True)
class FilterChoice:
    label: str
    href: str
    current: bool


def _filter_href(shown: selectors.InboxFilter) -> str:
    params = {"unread": "true"} if shown.unread_only else {}
    if shown.kind:
        params["kind"] = shown.kind
    return reverse("notifications") + (f"?{urlencode(params)}" if params else "")


def _filter_choices(shown: selectors.InboxFilter) -> dict[str, list[FilterChoice]]:
    """Links, not a form: a filtered list can be bookmarked, shared and opened in a new tab."""
    kinds = [kind for kind in Notification.Kind if kind in Notification.PRODUCED_KINDS or kind == shown.kind]
    by_kind = [
        selectors.InboxFilter(unread_only=shown.unread_only),
        *(selectors.InboxFilter(unread_only=shown.unread_only, kind=kind) for kind in kinds),
    ]
    return {
        "read": [
            FilterChoice("Unread", _filter_href(replace(shown, unread_only=True)), shown.unread_only),
            FilterChoice("All", _filter_href(replace(shown, unread_only=False)), not shown.unread_only),
        ],
        "kind": [
            FilterChoice(
                f"{Notification.Kind(option.kind).label}s" if option.kind else "Every kind",
                _filter_href(option),
                option.kind == shown.kind,
            )
            for option in by_kind
        ],
    }


@identity_required
def notifications_page(request: HttpRequest) -> HttpResponse:
    query = NotificationInboxQuerySerializer(data=request.GET)
    if query.is_valid():
        shown = query.shown()
    else:
        shown = selectors.EVERYTHING
        messages.error(request, f"That filter cannot be read ({flattened_detail(query.errors)}); showing everything.")
    inbox = selectors.inbox(user_id=actor_of(request).user_id, limit=selectors.INBOX_MAX_LIMIT, shown=shown)
    context = {"inbox": selectors.inbox_for_display(inbox), "shown": shown, "filters": _filter_choices(shown)}
    return render(request, "collab/notifications.html", context)


@identity_required
def notification_read_page(request: HttpRequest, notification_id: int) -> HttpResponse:
    services.notification_mark_read(notification_id=notification_id, user_id=actor_of(request).user_id)
    return HttpResponseRedirect(safe_next(request, reverse("notifications")))


@identity_required
def notifications_read_all_page(request: HttpRequest) -> HttpResponse:
    marked = services.notifications_mark_all_read(user_id=actor_of(request).user_id)
    messages.success(request, f"Marked {marked} notification{'s' if marked != 1 else ''} read.")
    return HttpResponseRedirect(safe_next(request, reverse("notifications")))


notifications = html_or_api(page=notifications_page, api=NotificationListApi.as_view())
notification_read = html_or_api(page=require_POST(notification_read_page), api=NotificationReadApi.as_view())
notifications_read_all = html_or_api(
    page=require_POST(notifications_read_all_page), api=NotificationReadAllApi.as_view()
)


@require_POST
def switch_user(request: HttpRequest) -> HttpResponse:
    """The page header's user switcher; it exists only while identity is mocked."""
    if not mock_identity_enabled():
        raise Http404("The user switcher exists only with mock identity.")
    user_id = request.POST.get("user_id", "")
    user = get_user_directory().get(user_id)
    if user is None:
        messages.error(request, f"There is no user {user_id!r} in the directory.")
    else:
        request.session[MOCK_SESSION_KEY] = user.id
        messages.success(request, f"You are now acting as {user.name}.")
    return HttpResponseRedirect(safe_next(request, reverse("home")))


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


# The session key that carries a just-created token across the redirect after the POST, to the
# one GET that shows it; that GET removes it.
ISSUED_TOKEN_SESSION_KEY = "issued_token"


@identity_required
def tokens_page(request: HttpRequest) -> HttpResponse:
    """Lists the person's tokens. Creating one answers with a redirect (post/redirect/get, so a
    reload creates nothing), and the next GET shows the token once: it waits in the person's own
    session, never in a message or a URL, and is removed from it as it is shown."""
    actor = actor_of(request)
    if request.method == "POST":
        try:
            issued = tokens.token_create(
                actor=actor, name=request.POST.get("name", ""), via_token=request.identity.source == "token"
            )
        except DomainError as exc:
            messages.error(request, str(exc.detail))
        else:
            request.session[ISSUED_TOKEN_SESSION_KEY] = {"name": issued.row.name, "token": issued.token}
        return HttpResponseRedirect(reverse("me-tokens"))
    shown = request.session.pop(ISSUED_TOKEN_SESSION_KEY, None)
    response = render(request, "collab/tokens.html", {"tokens": tokens.tokens_of(actor=actor), "issued": shown})
    response["Cache-Control"] = "no-store"
    return response


@identity_required
@require_POST
def token_revoke_page(request: HttpRequest, token_id: int) -> HttpResponse:
    try:
        row = tokens.token_revoke(token_id=token_id, actor=actor_of(request))
    except DomainError as exc:
        messages.error(request, str(exc.detail))
    else:
        messages.success(request, f"Revoked {row.name}; scripts using it are refused from now on.")
    return HttpResponseRedirect(reverse("me-tokens"))


me_tokens = html_or_api(page=tokens_page, api=ApiTokenListApi)
# A form cannot send DELETE, so the page's revoke button posts to the same path.
me_token = html_or_api(page=token_revoke_page, api=ApiTokenApi)

"""The base every API view of the service extends."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Executor
from typing import Any, ClassVar
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from collab.errors import Forbidden, UpgradeRequired
from collab.later import Later


class ServiceApiView(APIView):
    """An APIView that refuses a malformed body even where the endpoint ignores its body.

    DRF parses lazily, so `POST /notifications/read-all` with broken JSON would otherwise
    succeed; a client that sent garbage should hear about it (400 `malformed_request`).
    """

    # A view that streams the raw request body itself (file writes) sets this, so nothing parses it first.
    reads_raw_body: ClassVar[bool] = False

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if not self.reads_raw_body and request.method in ("POST", "PUT", "PATCH") and request.stream is not None:
            request.data  # noqa: B018 - parsing raises ParseError for a malformed body


def created(data: Any, *, url_name: str, status: int = 201, **url_kwargs: Any) -> Response:
    """A create's answer: the new object, and its address in `Location` (`url_name` with `url_kwargs`)."""
    return Response(data, status=status, headers={"Location": reverse(url_name, kwargs=url_kwargs)})


def location_header(status: int = 201) -> OpenApiParameter:
    """The `Location` header of a create's answer, for `extend_schema(parameters=[...])`."""
    return OpenApiParameter(
        "Location",
        str,
        OpenApiParameter.HEADER,
        response=[status],
        description="The address of what was created.",
    )


def answered_later(
    view: APIView,
    request: Request,
    work: Iterator[Any],
    *,
    respond: Callable[[Any], Response],
    pool: Executor | None = None,
    release: Callable[[], None] | None = None,
) -> Later:
    """The view's answer once `work` ends (`collab.later`): `respond(its last event)`, or what the
    view answers to the exception it raised (a refusal's status and body), rendered as the view
    renders. `pool` and `release` as `Later` takes them."""

    def rendered(response: Response) -> HttpResponse:
        final = view.finalize_response(request, response)
        final.render()
        return final

    return Later(
        work,
        request=request._request,
        respond=lambda last: rendered(respond(last)),
        fail=lambda exc: rendered(view.handle_exception(exc)),
        pool=pool,
        release=release,
    )


# Set on the scope of a WebSocket's handshake, which the ASGI handler (workspace/serving.py) runs
# through the middleware chain and the view of its path as a GET, so that it is authenticated and
# authorised as any request is; a header cannot set it.
WEBSOCKET_SCOPE_KEY = "workspace.websocket"
WebSocketAttach = Callable[[Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class WebSocketAccepted(HttpResponse):
    """A view's yes to a WebSocket's handshake: the handler accepts it and runs `attach(receive, send)`."""

    def __init__(self, attach: WebSocketAttach) -> None:
        super().__init__(status=101)
        self.websocket_attach = attach


def websocket_or_426(request: Request, attach: WebSocketAttach) -> HttpResponse:
    """`attach` for a WebSocket's handshake from this site's own pages or from a client that is no
    browser (it sends no Origin); 403 `cross_origin` for one another site's page opened (cross-site
    WebSocket hijacking: the browser would send this site's cookies); 426 for a plain GET."""
    scope = getattr(request._request, "scope", None) or {}
    if not scope.get(WEBSOCKET_SCOPE_KEY):
        raise UpgradeRequired(error="websocket_required", detail="This address is a WebSocket: connect with one.")
    origin = request.headers.get("Origin")
    if origin is not None and not _same_origin(origin, request):
        raise Forbidden(error="cross_origin", detail="A WebSocket opened by another site's page is refused.")
    return WebSocketAccepted(attach)


def _same_origin(origin: str, request: Request) -> bool:
    parsed = urlsplit(origin)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        return False
    trusted = {urlsplit(value).netloc for value in settings.CSRF_TRUSTED_ORIGINS}
    return parsed.netloc == request.get_host() or parsed.netloc in trusted

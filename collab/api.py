"""The base every API view of the service extends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from typing import Any, ClassVar

from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

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

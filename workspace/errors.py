"""Site-wide 400, 404, 500 and 503: JSON with `error` and `detail` for API clients, a page for people."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.signals import got_request_exception
from django.db.utils import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader

from collab.web import prefers_html


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if prefers_html(request):
        return render(request, "404.html", {"path": request.path}, status=404)
    return JsonResponse({"error": "not_found", "detail": f"Nothing is at {request.path}."}, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if prefers_html(request):
        # No context processors here: the database may be what failed.
        return HttpResponse(loader.get_template("500.html").render(), status=500)
    return JsonResponse({"error": "server_error", "detail": "Something went wrong on our side."}, status=500)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Requests Django refuses before any view runs: a body past DATA_UPLOAD_MAX_MEMORY_SIZE is
    413, anything else (a bad Host header, a malformed multipart body) 400."""
    too_big = isinstance(exception, RequestDataTooBig)
    status, error = (413, "body_too_large") if too_big else (400, "bad_request")
    detail = (
        "The request body is larger than this service accepts in one request."
        if too_big
        else "The request could not be read."
    )
    if prefers_html(request):
        return render(request, "400.html", {"detail": detail}, status=status)
    return JsonResponse({"error": error, "detail": detail}, status=status)


# Errors that mean "the database cannot serve now" (down, unreachable, locked): worth a retry.
_DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)


def database_unavailable(request: HttpRequest) -> HttpResponse:
    """503 with Retry-After; rendered without context processors, which would ask the database."""
    seconds = settings.WORKSPACE_DATABASE_RETRY_AFTER_SECONDS
    if prefers_html(request):
        response = HttpResponse(loader.get_template("503.html").render({"retry_after": seconds}), status=503)
    else:
        response = JsonResponse(
            {
                "error": "database_unavailable",
                "detail": f"The database is not answering; nothing was changed. Try again in {seconds} seconds.",
            },
            status=503,
        )
    response["Retry-After"] = str(seconds)
    return response


def _note_database_failure(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    # Sent while the exception is being handled, wherever it was raised (a view, a middleware, DRF).
    if request is not None and isinstance(sys.exc_info()[1], _DATABASE_UNAVAILABLE):
        request.database_unavailable = True  # type: ignore[attr-defined]


got_request_exception.connect(_note_database_failure, dispatch_uid="workspace.errors.database_unavailable")


class DatabaseUnavailableMiddleware:
    """Turns the 500 of a request that failed because the database could not serve into a 503 with
    Retry-After, in every mode (DEBUG's technical page included): clients should retry, not report."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code >= 500 and getattr(request, "database_unavailable", False):
            return database_unavailable(request)
        return response

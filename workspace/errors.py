"""Site-wide 400, 404 and 500: JSON with `error` and `detail` for API clients, a page for people."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
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

"""Site-wide errors: JSON with `error` and `detail` for API clients, the site's own page for people,
in every mode (DEBUG's technical pages never reach a browser)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.signals import got_request_exception
from django.db.utils import DataError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader
from django.views.debug import ExceptionReporter

from collab.edge import headers_of, json_response, refusal_page, status_of, unstorable_value
from collab.errors import DomainError, Unavailable
from collab.web import prefers_html


def _answer(request: HttpRequest, *, status: int, error: str, detail: str, template: str) -> HttpResponse:
    if prefers_html(request):
        return render(request, template, {"path": request.path, "detail": detail, "status": status}, status=status)
    return JsonResponse({"error": error, "detail": detail}, status=status)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _answer(request, status=404, error="not_found", detail=f"Nothing is at {request.path}.", template="404.html")


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    given = str(exception) if exception is not None and str(exception) else ""
    detail = given or "You do not have the right to do this here."
    return _answer(request, status=403, error="permission_denied", detail=detail, template="403.html")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form posted without our token: an old tab after a restart, or another site's form."""
    detail = "The form was sent without a valid security token. Reload the page and send it again."
    return _answer(request, status=403, error="csrf_failed", detail=detail, template="403.html")


def _without_database() -> dict[str, Any]:
    """What base.html reads that the context processors would give, for a page rendered without them."""
    return {"root_path": settings.WORKSPACE_ROOT_PATH}


def server_error(request: HttpRequest) -> HttpResponse:
    if prefers_html(request):
        # No context processors here: the database may be what failed.
        return HttpResponse(loader.get_template("500.html").render(_without_database()), status=500)
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
    return _answer(request, status=status, error=error, detail=detail, template="400.html")


def _method_not_allowed(request: HttpRequest, *, allowed: str) -> HttpResponse:
    """A browser opening an address that only takes a form's POST (require_POST answers an empty 405)."""
    detail = "This address is where a form sends its changes; open the page the form is on instead."
    response = _answer(request, status=405, error="method_not_allowed", detail=detail, template="400.html")
    response["Allow"] = allowed
    return response


def body_timeout(request: HttpRequest) -> HttpResponse:
    """408: the request body stopped arriving (workspace/serving.py); nothing it carried was stored."""
    detail = "The request body stopped arriving, so the request was cut off; nothing was changed. Send it again."
    return _answer(request, status=408, error="request_body_timeout", detail=detail, template="400.html")


def refused(request: HttpRequest, exc: DomainError) -> HttpResponse:
    """A service's refusal that a page let through: its status, detail and headers (collab.edge), never a 500."""
    status = status_of(exc)
    if prefers_html(request):
        template = {403: "403.html", 404: "404.html"}.get(status, "400.html")
        context = {"path": request.path, "detail": exc.detail, "status": status}
        response = refusal_page(request, template, context, exc)
        for name, value in headers_of(exc).items():
            response[name] = value
        return response
    return json_response(exc)


# Errors that mean "the database cannot serve now" (down, unreachable, locked): worth a retry.
_DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)


def database_unavailable(request: HttpRequest) -> HttpResponse:
    """503 with Retry-After; rendered without context processors, which would ask the database."""
    seconds = settings.WORKSPACE_DATABASE_RETRY_AFTER_SECONDS
    if not prefers_html(request):
        detail = f"The database is not answering; nothing was changed. Try again in {seconds} seconds."
        return json_response(Unavailable(error="database_unavailable", detail=detail, retry_after=seconds))
    context = {**_without_database(), "retry_after": seconds}
    response = HttpResponse(loader.get_template("503.html").render(context), status=503)
    response["Retry-After"] = str(seconds)
    return response


def _note_unhandled_exception(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    # Sent while the exception is being handled, wherever it was raised (a view, a middleware, DRF),
    # after Django has logged it and before DEBUG turns it into a traceback page.
    if request is not None:
        request.unhandled_exception = sys.exc_info()[1]  # type: ignore[attr-defined]


got_request_exception.connect(_note_unhandled_exception, dispatch_uid="workspace.errors.unhandled_exception")


class _NoTechnicalPage(ExceptionReporter):
    """What DEBUG's technical page is built with for this request (Django asks the request first).

    Django builds that page, settings and the server's environment included, for a request it
    refuses around a view (a Host it does not serve, more fields or body than it reads), a case
    got_request_exception never hears of. This reporter notes the exception for
    SiteErrorsMiddleware, which answers with the site's page, and has nothing to show itself.
    """

    def get_traceback_html(self) -> str:
        self.request.unhandled_exception = self.exc_value  # type: ignore[union-attr]
        return ""

    def get_traceback_text(self) -> str:
        return self.get_traceback_html()


class SiteErrorsMiddleware:
    """The site's own answer to every failure, whatever DEBUG says (the demo runs with it on):

    - a view's Http404, PermissionDenied or uncaught DomainError: the site's 404, 403 or refusal page
      for a browser, JSON for an API client; a value the database refused (a NUL character on
      PostgreSQL) is the API's 400 `invalid_value` there too;
    - a path no URL matches: DEBUG would list every URL pattern; the site's 404 instead;
    - a browser opening a POST-only address: the site's page instead of an empty 405;
    - an unhandled exception: 503 with Retry-After when the database could not serve (clients
      should retry, not report), else the site's 500. Django has logged the traceback already;
    - a request Django refuses as bad (a Host it does not serve, too many fields, too large a
      body): the site's 400 or 413, where DEBUG would show its technical page (a body too large
      to read at all, or one that stopped arriving, is answered before the view: workspace/serving.py).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.exception_reporter_class = _NoTechnicalPage  # type: ignore[attr-defined]
        response = self.get_response(request)
        failure = getattr(request, "unhandled_exception", None)
        if failure is not None and response.status_code >= 500:
            if isinstance(failure, _DATABASE_UNAVAILABLE):
                return database_unavailable(request)
            return server_error(request)
        if failure is not None and response.status_code == 400:
            return bad_request(request, failure)
        if response.status_code == 404 and request.resolver_match is None and settings.DEBUG:
            return not_found(request)
        if response.status_code == 405 and not response.content and prefers_html(request):
            return _method_not_allowed(request, allowed=response.get("Allow", ""))
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, Http404):
            return not_found(request, exception)
        if isinstance(exception, PermissionDenied):
            return permission_denied(request, exception)
        if isinstance(exception, DomainError):
            return refused(request, exception)
        if isinstance(exception, DataError):
            return refused(request, unstorable_value())
        return None

"""The one mapping from domain errors (`collab.errors`) to what each edge answers: the status, the
API's JSON body `{"error", "detail", ...}` and its headers (Retry-After), a line for a stream's
`error` event, a message in admin, a task's failure line. The site's pages use the same status and
detail (`refusal_page`, `workspace.errors.refused`). Nothing else builds an error body by hand.

DRF's own exceptions (a serializer's ValidationError, NotAuthenticated...) and Django's Http404 and
PermissionDenied get the same `{"error", "detail"}` shape here too.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import DataError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from rest_framework import exceptions, status
from rest_framework.response import Response

from collab.errors import (
    Conflict,
    DomainError,
    Forbidden,
    Gone,
    Invalid,
    Misconfigured,
    NotAuthenticated,
    NotFound,
    QuotaExceeded,
    TooLarge,
    TooManyRequests,
    Unavailable,
    Unprocessable,
    UnsupportedType,
    UpgradeRequired,
)

# Kind -> status; a subclass answers as its nearest listed ancestor.
STATUS_BY_KIND: dict[type[DomainError], int] = {
    Invalid: 400,
    NotAuthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    Gone: 410,
    TooLarge: 413,
    UnsupportedType: 415,
    Unprocessable: 422,
    UpgradeRequired: 426,
    TooManyRequests: 429,
    Misconfigured: 500,
    Unavailable: 503,
    QuotaExceeded: 507,
}


def status_of(error: DomainError) -> int:
    for kind in type(error).__mro__:
        if kind in STATUS_BY_KIND:
            return STATUS_BY_KIND[kind]
    return status.HTTP_400_BAD_REQUEST


def refusal_status(refusal: object) -> int:
    """The status of any refusal a page shows: a domain error's by its kind, crudgen's own errors (a
    revision conflict, a restore of a live workflow) by the `status_code` crudgen gives them."""
    if isinstance(refusal, DomainError):
        return status_of(refusal)
    return int(getattr(refusal, "status_code", status.HTTP_400_BAD_REQUEST))


def _rendered(value: Any) -> Any:
    # QuotaExceeded lists the other binding limits under `also` as errors of their own.
    if isinstance(value, DomainError):
        return body_of(value)
    if isinstance(value, list | tuple):
        return [_rendered(item) for item in value]
    return value


def body_of(error: DomainError) -> dict[str, Any]:
    """The JSON body: `error`, `detail` and the error's extra fields (what a stream's `error` event carries too)."""
    return {"error": error.error, "detail": error.detail, **{key: _rendered(v) for key, v in error.extra.items()}}


def headers_of(error: DomainError) -> dict[str, str]:
    retry_after = getattr(error, "retry_after", None)
    return {} if retry_after is None else {"Retry-After": str(retry_after)}


def refusal_body(exc: Exception) -> dict[str, Any]:
    """A stream's `error` event, as the JSON answer's handler would say it: a domain error as it is,
    Http404 as `not_found` (the thing went meanwhile), a DataError as `invalid_value`."""
    if isinstance(exc, DomainError):
        return body_of(exc)
    if isinstance(exc, Http404):
        return body_of(NotFound(error="not_found", detail="Not found."))
    if isinstance(exc, DataError):
        return body_of(unstorable_value())
    raise TypeError(f"{type(exc).__name__} is not a refusal") from exc


def json_response(error: DomainError) -> JsonResponse:
    """The API's answer from a plain Django view or middleware (DRF views go through the handler below)."""
    response = JsonResponse(body_of(error), status=status_of(error))
    for name, value in headers_of(error).items():
        response[name] = value
    return response


def refusal_page(request: HttpRequest, template: str, context: dict[str, Any], refusal: object | None) -> HttpResponse:
    """`template`, answered with the status of the `refusal` it shows (200 without one).

    A domain error's body rides along as `refusal_body`: the request log (workspace/request_log.py)
    reads `error` and `dimension` from a JSON answer, and a page has none to read.
    """
    response = render(request, template, context, status=refusal_status(refusal) if refusal is not None else 200)
    if isinstance(refusal, DomainError):
        response.refusal_body = body_of(refusal)  # type: ignore[attr-defined]
    return response


def admin_refused(model_admin: Any, request: HttpRequest, error: DomainError) -> None:
    """In admin a refusal of an action is an error message on the page the person is on, never a 500."""
    model_admin.message_user(request, error.detail, messages.ERROR)


def form_error(error: DomainError) -> forms.ValidationError:
    """In a form (admin's included) a refusal of a field's value is that field's error."""
    return forms.ValidationError(error.detail, code=error.error)


def failure_line(exc: BaseException) -> str:
    """How a task's failed state names what stopped it: a refusal by its code, anything else by its class."""
    if isinstance(exc, DomainError):
        return f"{exc.error}: {exc.detail}"
    return f"{type(exc).__name__}: {exc}"


def unstorable_value() -> Invalid:
    """The answer to a DataError: the database refused a value Python accepted (PostgreSQL: a NUL
    character), so nothing was stored; the caller sent it, so it is a 400, not a 500."""
    return Invalid(error="invalid_value", detail="A value cannot be stored (e.g. a NUL character).")


def flattened_detail(detail: Any) -> str:
    """A validation error's nested detail as one readable line (`field: message; ...`)."""
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {flattened_detail(value)}" for key, value in detail.items())
    if isinstance(detail, list):
        return " ".join(flattened_detail(item) for item in detail)
    return str(detail)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's EXCEPTION_HANDLER: every API error as `{"error", "detail", ...}`."""
    # Imported here: rest_framework.views loads the authentication classes, and collab's import
    # collab.middleware, which answers with json_response from this module.
    from rest_framework.views import exception_handler

    if isinstance(exc, DataError):
        exc = unstorable_value()
    if isinstance(exc, Http404):
        exc = exceptions.NotFound("Not found.")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, DomainError):
        return Response(body_of(exc), status=status_of(exc), headers=headers_of(exc))
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = {"error": "validation_error", "detail": flattened_detail(exc.detail), "fields": exc.detail}
        response.status_code = status.HTTP_400_BAD_REQUEST
        return response
    # Imported here: crudgen's views load DRF's settings, whose authentication imports this module.
    from crudgen.views import ERROR_CODES_BY_CLASS

    code = next((name for cls, name in ERROR_CODES_BY_CLASS if isinstance(exc, cls)), "error")
    response.data = {"error": code, "detail": flattened_detail(getattr(exc, "detail", str(exc)))}
    return response

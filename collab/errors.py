"""One error shape for every endpoint: JSON with an `error` code and a human `detail`."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import DataError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler


class ApiError(exceptions.APIException):
    """An error a caller caused, raised from services or views and rendered as-is."""

    def __init__(self, *, status_code: int, error: str, detail: str, **extra: Any) -> None:
        super().__init__(detail=detail, code=error)
        self.status_code = status_code
        self.error = error
        self.extra = extra


_CODES_BY_CLASS: list[tuple[type[exceptions.APIException], str]] = [
    (exceptions.ParseError, "malformed_request"),
    (exceptions.UnsupportedMediaType, "unsupported_media_type"),
    (exceptions.NotAuthenticated, "not_authenticated"),
    (exceptions.AuthenticationFailed, "invalid_credentials"),
    (exceptions.PermissionDenied, "permission_denied"),
    (exceptions.NotFound, "not_found"),
    (exceptions.MethodNotAllowed, "method_not_allowed"),
    (exceptions.NotAcceptable, "not_acceptable"),
    (exceptions.Throttled, "throttled"),
]


def flattened_detail(detail: Any) -> str:
    """A validation error's nested detail as one readable line (`field: message; ...`)."""
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {flattened_detail(value)}" for key, value in detail.items())
    if isinstance(detail, list):
        return " ".join(flattened_detail(item) for item in detail)
    return str(detail)


def unstorable_value() -> ApiError:
    """The answer to a DataError: the database refused a value Python accepted (PostgreSQL: a NUL
    character), so nothing was stored; the caller sent it, so it is a 400, not a 500."""
    return ApiError(status_code=400, error="invalid_value", detail="A value cannot be stored (e.g. a NUL character).")


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DataError):
        exc = unstorable_value()
    if isinstance(exc, Http404):
        exc = exceptions.NotFound("Not found.")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, ApiError):
        body = {"error": exc.error, "detail": str(exc.detail), **exc.extra}
        return Response(body, status=exc.status_code)
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = {"error": "validation_error", "detail": flattened_detail(exc.detail), "fields": exc.detail}
        response.status_code = status.HTTP_400_BAD_REQUEST
        return response
    code = next((name for cls, name in _CODES_BY_CLASS if isinstance(exc, cls)), "error")
    response.data = {"error": code, "detail": flattened_detail(getattr(exc, "detail", str(exc)))}
    return response

"""The site's URLs plus views that fail on purpose, to see what a person and a program get."""

from django.core.exceptions import PermissionDenied
from django.db import DataError
from django.http import HttpRequest, HttpResponse
from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from collab import errors
from collab.errors import Conflict, DomainError, QuotaExceeded
from workspace.urls import handler400, handler403, handler404, handler500  # noqa: F401 - this URLconf's handlers
from workspace.urls import urlpatterns as site_urlpatterns


def crashing_page(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug in a page")


def forbidden_page(request: HttpRequest) -> HttpResponse:
    raise PermissionDenied("Only the investigation's owner can archive it.")


def refusing_page(request: HttpRequest) -> HttpResponse:
    raise Conflict(error="filename_taken", detail="'notes.md' already names a file here.")


def quota_refusing_page(request: HttpRequest) -> HttpResponse:
    detail = "Opening a sandbox would exceed alice's count limit."
    raise QuotaExceeded(error="quota_exceeded", detail=detail)


def unstorable_value_page(request: HttpRequest) -> HttpResponse:
    raise DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")


def refusal_of_kind(kind: str) -> DomainError:
    """One refusal of each kind in collab.errors, with an extra field; the retryable ones say when."""
    cls = getattr(errors, kind)
    when = {"retry_after": 7} if kind in ("TooManyRequests", "Unavailable") else {}
    return cls(error=f"refused_as_{kind.lower()}", detail=f"Refused as {kind}.", limit=3, **when)


def kind_refusing_page(request: HttpRequest, kind: str) -> HttpResponse:
    raise refusal_of_kind(kind)


class KindRefusingApi(APIView):
    authentication_classes: list = []
    permission_classes: list = []

    def get(self, request: Request, kind: str) -> Response:
        raise refusal_of_kind(kind)


urlpatterns = [
    path("test-errors/kind/<str:kind>", kind_refusing_page),
    path("test-errors/api/<str:kind>", KindRefusingApi.as_view()),
    path("test-errors/unstorable", unstorable_value_page),
    path("test-errors/quota", quota_refusing_page),
    path("test-errors/crash", crashing_page),
    path("test-errors/forbidden", forbidden_page),
    path("test-errors/refused", refusing_page),
    *site_urlpatterns,
]

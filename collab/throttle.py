"""The answer to a caller locked out for guessing passwords (django-axes calls it)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from collab.edge import json_response
from collab.errors import TooManyRequests


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    """429 with Retry-After: JSON for API callers, the login page with the reason for browsers."""
    seconds = int(settings.AXES_COOLOFF_TIME.total_seconds())
    detail = f"Too many wrong passwords. Try again in {seconds // 60} minutes."
    if not ("text/html" in request.headers.get("Accept", "") and request.path.endswith("/login/")):
        return json_response(TooManyRequests(error="too_many_attempts", detail=detail, retry_after=seconds))
    response = render(request, "registration/login.html", {"form": None, "locked_out": detail}, status=429)
    response["Retry-After"] = str(seconds)
    return response


def client_address(request: HttpRequest) -> str:
    """The address lockouts count by: behind the TLS proxy (DJANGO_BEHIND_TLS_PROXY) the one the
    proxy saw, the last X-Forwarded-For entry, which a client cannot forge; else REMOTE_ADDR."""
    if settings.WORKSPACE_BEHIND_PROXY:
        forwarded = [part.strip() for part in request.headers.get("X-Forwarded-For", "").split(",") if part.strip()]
        if forwarded:
            return forwarded[-1]
    return request.META.get("REMOTE_ADDR", "")

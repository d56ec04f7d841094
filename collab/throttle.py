"""Password-guessing lockouts (django-axes): the locked-out answer, the address counted, what a login forgives."""

from __future__ import annotations

from typing import Any

from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from collab.edge import json_response
from collab.errors import TooManyRequests
from collab.web import safe_next


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    """429 with Retry-After: JSON for API callers, the login page with the reason for browsers."""
    seconds = int(settings.AXES_COOLOFF_TIME.total_seconds())
    detail = f"Too many wrong passwords. Try again in {seconds // 60} minutes."
    if not ("text/html" in request.headers.get("Accept", "") and request.path.endswith("/login/")):
        return json_response(TooManyRequests(error="too_many_attempts", detail=detail, retry_after=seconds))
    context = {"form": None, "locked_out": detail, "next": safe_next(request, "")}
    response = render(request, "registration/login.html", context, status=429)
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


def forgive_own_failures(sender: object, request: HttpRequest | None, user: AbstractBaseUser, **kwargs: Any) -> None:
    """On `user_logged_in`, forgets the failures the login vouches for: its own username's, from its
    own address. Nothing else, whoever logged in.

    It stands in for AXES_RESET_ON_SUCCESS (off), which deletes every row matching any one lockout
    parameter: one person's login from an address wiped the failures counted there against every
    other username, so four guesses for carol, a login as bob, and again, never locked carol out.
    The address's count keeps every other username's failures (a login as bob says nothing of
    the guesses at others made from his address: a shared office, or an attacker who holds one
    account), and the username's count keeps the failures from other addresses (they may be
    someone else's guesses at this account, and they count toward those addresses too). Both wear
    off with the cool-off instead.

    Written against the rows (the database handler, AXES_HANDLER's default), not through
    `AxesProxyHandler.reset_attempts`, which reads a missing address as every address."""
    if request is None:
        return
    AccessAttempt.objects.filter(username=user.get_username(), ip_address=client_address(request) or None).delete()

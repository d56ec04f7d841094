"""DRF authentication that trusts the identity CurrentUserMiddleware resolved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rest_framework.authentication import BaseAuthentication, CSRFCheck
from rest_framework.request import Request

from collab.errors import Forbidden
from collab.middleware import API_CHALLENGE


@dataclass(frozen=True)
class AuthenticatedIdentity:
    """What DRF sees as `request.user`: a directory id, not a Django user row."""

    id: str
    is_staff: bool = False
    is_authenticated: bool = True
    is_anonymous: bool = False

    @property
    def username(self) -> str:
        return self.id

    def get_username(self) -> str:
        return self.id


# Identities a browser carries along on its own: a cross-site form could make it send them, so
# their unsafe requests need the CSRF token. In mock mode a request that names nobody (no
# X-User-Id) is such a browser too: it acts as the default person. A header or a token is stated
# by the caller, which a cross-site form cannot do.
COOKIE_SOURCES = ("session", "default")
# HTTP Basic is stated by scripts, but a browser that has sent it once (a URL with credentials,
# a challenge answered long ago) repeats it on its own to every request for this site, a
# cross-site form's included. A browser always names the page's origin on an unsafe request and
# a script names none, so a Basic write from another site's page is refused.
REPEATED_BY_BROWSERS = ("basic",)
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")


class WorkspaceAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[AuthenticatedIdentity, None] | None:
        identity = getattr(request._request, "identity", None)
        if identity is None or not identity.user_id:
            return None
        if identity.source in COOKIE_SOURCES:
            self._enforce_csrf(request)
        elif identity.source in REPEATED_BY_BROWSERS:
            self._enforce_same_origin(request)
        return AuthenticatedIdentity(id=identity.user_id, is_staff=identity.is_staff), None

    def authenticate_header(self, request: Request) -> str:
        # A challenge makes DRF answer 401 rather than 403 to anonymous callers. Never Basic: a
        # browser answers that with a password prompt and then sends the password everywhere.
        return API_CHALLENGE

    @staticmethod
    def _enforce_csrf(request: Request) -> None:
        """Cookie-borne identity must prove the request came from our own pages."""
        check = _csrf_check()
        check.process_request(request)
        reason = check.process_view(request, None, (), {})
        if reason:
            raise _csrf_failed(
                f"CSRF failed: {reason} Send the page's CSRF token, or name yourself (X-User-Id, a token)."
            )

    @staticmethod
    def _enforce_same_origin(request: Request) -> None:
        """A Basic write that names an origin must name ours (or one of CSRF_TRUSTED_ORIGINS)."""
        origin = request.headers.get("Origin")
        if request.method in _SAFE_METHODS or origin is None:
            return
        # Django's own comparison, the one its CSRF check makes of a page's Origin header.
        if not _csrf_check()._origin_verified(request):
            raise _csrf_failed(
                f"CSRF failed: HTTP Basic credentials came with a request from the page of {origin}, another site. "
                "Scripts send no Origin header; better, they use an API token."
            )


def _csrf_check() -> CSRFCheck:
    def no_view(_request: Any) -> None:
        return None

    return CSRFCheck(no_view)


def _csrf_failed(detail: str) -> Forbidden:
    return Forbidden(error="csrf_failed", detail=detail)

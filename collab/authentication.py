"""DRF authentication that trusts the identity CurrentUserMiddleware resolved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rest_framework.authentication import BaseAuthentication, CSRFCheck
from rest_framework.request import Request


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
# X-User-Id) is such a browser too: it acts as the default person. A header or credentials are
# stated by the caller, which a cross-site form cannot do.
COOKIE_SOURCES = ("session", "default")


class WorkspaceAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[AuthenticatedIdentity, None] | None:
        identity = getattr(request._request, "identity", None)
        if identity is None or not identity.user_id:
            return None
        if identity.source in COOKIE_SOURCES:
            self._enforce_csrf(request)
        return AuthenticatedIdentity(id=identity.user_id, is_staff=identity.is_staff), None

    def authenticate_header(self, request: Request) -> str:
        # A challenge makes DRF answer 401 rather than 403 to anonymous callers.
        return 'Basic realm="workspace"'

    @staticmethod
    def _enforce_csrf(request: Request) -> None:
        """Cookie-borne identity must prove the request came from our own pages."""

        def no_view(_request: Any) -> None:
            return None

        check = CSRFCheck(no_view)
        check.process_request(request)
        reason = check.process_view(request, None, (), {})
        if reason:
            # Imported here: collab.errors loads DRF's settings, which load this module.
            from collab.errors import ApiError

            raise ApiError(
                status_code=403,
                error="csrf_failed",
                detail=f"CSRF failed: {reason} Send the page's CSRF token, or name yourself (X-User-Id, credentials).",
            )

"""DRF authentication that trusts the identity CurrentUserMiddleware resolved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rest_framework.authentication import BaseAuthentication, CSRFCheck
from rest_framework.exceptions import PermissionDenied
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


class WorkspaceAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[AuthenticatedIdentity, None] | None:
        identity = getattr(request._request, "identity", None)
        if identity is None or not identity.user_id:
            return None
        if identity.source == "session":
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
            raise PermissionDenied(f"CSRF failed: {reason}")

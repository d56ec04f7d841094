"""Resolves who is asking, once per request, and binds it for the current-user provider."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import authenticate, get_user_model
from django.http import HttpRequest, HttpResponse

from collab.edge import json_response
from collab.errors import NotAuthenticated
from collab.identity import (
    MockUserProvider,
    bind_request_user,
    get_user_directory,
    get_user_provider,
    unbind_request_user,
)

MOCK_SESSION_KEY = "mock_user_id"
# The challenge of every 401. Never `Basic`: a browser answers that with a password prompt, then
# sends the password on its own with every request to this site, another site's forms included.
# Scripts sign in with a token (`Authorization: Bearer` or `Token`); Basic still works, unasked.
API_CHALLENGE = 'Bearer realm="workspace"'


@dataclass(frozen=True)
class RequestIdentity:
    user_id: str | None
    source: str  # "header", "session", "default", "basic", "token" or "anonymous"
    is_staff: bool = False


class IdentityRejected(NotAuthenticated):
    def __init__(self, error: str, detail: str) -> None:
        super().__init__(error=error, detail=detail)


def _mock_identity(request: HttpRequest, provider: MockUserProvider) -> RequestIdentity:
    # Credentials that fail are refused here as in production: only a request that names nobody
    # is the demo's default person.
    directory = get_user_directory()
    credentials = _basic_credentials(request)
    if credentials is not None:
        account = _basic_identity(request, credentials)
        if directory.get(account.user_id) is None:
            raise IdentityRejected(
                "unknown_user", f"{account.user_id!r} has an account but is not in the user directory."
            )
        # Staff as every other way of naming someone in the demo says it, not by the account's flag.
        return RequestIdentity(account.user_id, "basic", account.user_id in settings.WORKSPACE_MOCK_STAFF)
    if request.headers.get("Authorization", "").strip():
        # A scheme this service does not take (Digest, Negotiate...) is not "no credentials".
        raise IdentityRejected("invalid_credentials", "The Authorization header is neither an API token nor Basic.")
    header_id = request.headers.get("X-User-Id", "").strip()
    if header_id:
        if directory.get(header_id) is None:
            raise IdentityRejected("unknown_user", f"X-User-Id names {header_id!r}, who is not in the user directory.")
        return RequestIdentity(header_id, "header", header_id in settings.WORKSPACE_MOCK_STAFF)
    session_id = request.session.get(MOCK_SESSION_KEY) if hasattr(request, "session") else None
    if session_id and directory.get(session_id) is not None:
        return RequestIdentity(session_id, "session", session_id in settings.WORKSPACE_MOCK_STAFF)
    default_id = provider.current_user_id()
    if default_id:
        return RequestIdentity(default_id, "default", default_id in settings.WORKSPACE_MOCK_STAFF)
    return RequestIdentity(None, "anonymous")


def _basic_credentials(request: HttpRequest) -> tuple[str, str] | None:
    # Any whitespace after the scheme (a tab too); `Basic` with nothing after it is malformed.
    scheme, *rest = request.headers.get("Authorization", "").split(None, 1) or [""]
    if scheme.lower() != "basic":
        return None
    encoded = rest[0].strip() if rest else ""
    if not encoded:
        raise IdentityRejected("invalid_credentials", "The Basic authorization header is malformed.")
    try:
        username, _, password = base64.b64decode(encoded).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise IdentityRejected("invalid_credentials", "The Basic authorization header is malformed.") from exc
    if not _could_be_a_username(username):
        raise IdentityRejected("invalid_credentials", "The username or password is wrong.")
    return username, password


def _could_be_a_username(username: str) -> bool:
    """Whether some account could have this name. One none can have is wrong without a look: PostgreSQL
    refuses a NUL in any query, and the lockout's failure row holds 255 characters, so either raised
    here, in a middleware, where nothing turns the DataError into the site's 400 (a 500)."""
    user_model = get_user_model()
    max_length = user_model._meta.get_field(user_model.USERNAME_FIELD).max_length or 255
    return "\x00" not in username and len(username) <= max_length


def _django_identity(request: HttpRequest) -> RequestIdentity:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return RequestIdentity(user.get_username(), "session", bool(user.is_staff))
    credentials = _basic_credentials(request)
    if credentials is None:
        return RequestIdentity(None, "anonymous")
    return _basic_identity(request, credentials)


def _basic_identity(request: HttpRequest, credentials: tuple[str, str]) -> RequestIdentity:
    """The account whose username and password the Basic header says (through the login lockout)."""
    account = authenticate(request, username=credentials[0], password=credentials[1])
    if account is None or not account.is_active:
        raise IdentityRejected("invalid_credentials", "The username or password is wrong.")
    return RequestIdentity(account.get_username(), "basic", bool(account.is_staff))


TOKEN_SCHEMES = ("token", "bearer")


def _token_identity(request: HttpRequest) -> RequestIdentity | None:
    """`Authorization: Token <token>` or `Bearer <token>`: a personal API token, in every mode."""
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() not in TOKEN_SCHEMES:
        return None
    # Imported here: the token services load DRF (through collab.errors), which loads its settings.
    from collab.tokens import token_holder

    holder = token_holder(presented.strip())
    if holder is None:
        raise IdentityRejected("invalid_token", "The API token is unknown or revoked.")
    return RequestIdentity(holder.user_id, "token", holder.is_staff)


def resolve_identity(request: HttpRequest) -> RequestIdentity:
    token_identity = _token_identity(request)
    if token_identity is not None:
        return token_identity
    provider = get_user_provider()
    if isinstance(provider, MockUserProvider):
        return _mock_identity(request, provider)
    return _django_identity(request)


class CurrentUserMiddleware:
    """Sets `request.identity` and binds the id for `RequestUserProvider` during the request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            identity = resolve_identity(request)
        except IdentityRejected as rejected:
            response = json_response(rejected)
            response["WWW-Authenticate"] = (
                f'{API_CHALLENGE}, error="invalid_token"' if rejected.error == "invalid_token" else API_CHALLENGE
            )
            return response
        request.identity = identity
        token = bind_request_user(identity.user_id)
        try:
            return self.get_response(request)
        finally:
            unbind_request_user(token)

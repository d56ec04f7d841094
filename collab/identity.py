"""Who the users are (an injected directory) and who is asking (an injected provider)."""

from __future__ import annotations

import json
import threading
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string


@dataclass(frozen=True)
class User:
    """A person as the directory describes them (spec Area B, "User")."""

    id: str
    name: str
    section: str = ""
    email: str = ""
    photo_url: str | None = None


@runtime_checkable
class UserDirectory(Protocol):
    def get(self, user_id: str) -> User | None: ...

    def all(self) -> list[User]: ...


@runtime_checkable
class CurrentUserProvider(Protocol):
    def current_user_id(self) -> str | None: ...


class MockDirectory:
    """Users read once from a JSON file: `[{"id", "name", "section", "email", "photo_url"}]`."""

    def __init__(self, path: str | Path | None = None) -> None:
        source = Path(path or settings.WORKSPACE_MOCK_USERS_FILE)
        try:
            rows = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ImproperlyConfigured(f"Cannot read the mock user directory {source}: {exc}") from exc
        self._users = {row["id"]: User(**row) for row in rows}

    def get(self, user_id: str) -> User | None:
        return self._users.get(user_id)

    def all(self) -> list[User]:
        return sorted(self._users.values(), key=lambda user: user.id)


class DjangoUserDirectory:
    """Django auth users; a user's id is their username."""

    def get(self, user_id: str) -> User | None:
        from django.contrib.auth import get_user_model

        row = get_user_model().objects.filter(username=user_id, is_active=True).first()
        return self._as_user(row) if row else None

    def all(self) -> list[User]:
        from django.contrib.auth import get_user_model

        rows = get_user_model().objects.filter(is_active=True).order_by("username")
        return [self._as_user(row) for row in rows]

    @staticmethod
    def _as_user(row: Any) -> User:
        return User(
            id=row.get_username(),
            name=row.get_full_name() or row.get_username(),
            section="staff" if row.is_staff else "",
            email=row.email or "",
        )


# Set by CurrentUserMiddleware for the length of one request, on whichever thread serves it.
_request_user_id: ContextVar[str | None] = ContextVar("workspace_request_user_id", default=None)


class RequestUserProvider:
    """Production provider: the id the authentication middleware resolved for this request."""

    def current_user_id(self) -> str | None:
        return _request_user_id.get()


class MockUserProvider:
    """Test and demo provider: a process-wide id that tests switch between requests.

    Over HTTP the middleware lets `X-User-Id` or the page switcher pick someone else for one
    request; that choice wins over the switched id while the request runs.
    """

    def __init__(self, default_user_id: str | None = None) -> None:
        self._lock = threading.Lock()
        self._user_id = default_user_id if default_user_id is not None else settings.WORKSPACE_MOCK_DEFAULT_USER

    def switch(self, user_id: str | None) -> None:
        with self._lock:
            self._user_id = user_id

    def current_user_id(self) -> str | None:
        return _request_user_id.get() or self._user_id


@lru_cache(maxsize=8)
def _instance(dotted_path: str) -> Any:
    return import_string(dotted_path)()


def get_user_directory() -> UserDirectory:
    return _instance(settings.WORKSPACE_USER_DIRECTORY)


def get_user_provider() -> CurrentUserProvider:
    return _instance(settings.WORKSPACE_CURRENT_USER_PROVIDER)


def mock_identity_enabled() -> bool:
    return isinstance(get_user_provider(), MockUserProvider)


def current_user_id() -> str | None:
    """The caller's id; only the HTTP boundary may use this (work off the path gets it passed)."""
    return get_user_provider().current_user_id()


def bind_request_user(user_id: str | None) -> Any:
    """Binds the id for the current request; returns the token to `unbind_request_user`."""
    return _request_user_id.set(user_id)


def unbind_request_user(token: Any) -> None:
    _request_user_id.reset(token)


def unknown_user_ids(user_ids: list[str]) -> list[str]:
    directory = get_user_directory()
    return [user_id for user_id in user_ids if directory.get(user_id) is None]


def check_mock_identity_allowed(*, debug: bool, allow_flag: bool, directory_path: str, provider_path: str) -> None:
    """Refuses mock identity outside DEBUG unless explicitly allowed (docs/ARCHITECTURE.md §3)."""
    mocked = [p for p in (directory_path, provider_path) if p.rsplit(".", 1)[-1].startswith("Mock")]
    if mocked and not (debug or allow_flag):
        raise ImproperlyConfigured(
            f"Mock identity ({', '.join(mocked)}) is refused with DEBUG off: anyone could act as any user. "
            "Set WORKSPACE_MOCK_IDENTITY=0 to use Django users and logins, or set "
            "WORKSPACE_ALLOW_MOCK_IDENTITY=1 if this really is a demo or test deployment."
        )

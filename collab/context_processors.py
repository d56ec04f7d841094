"""What the page header needs: who you are, who you could switch to, and the unread count."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from collab.identity import get_user_directory, mock_identity_enabled
from collab.selectors import unread_count


def workspace_header(request: HttpRequest) -> dict[str, Any]:
    identity = getattr(request, "identity", None)
    root = {"root_path": settings.WORKSPACE_ROOT_PATH}
    if identity is None or not identity.user_id:
        return {**root, "current_user": None, "unread_count": 0, "mock_identity": mock_identity_enabled()}
    directory = get_user_directory()
    mocked = mock_identity_enabled()
    return {
        **root,
        "current_user": directory.get(identity.user_id),
        "current_user_id": identity.user_id,
        "current_user_is_staff": identity.is_staff,
        "unread_count": unread_count(user_id=identity.user_id),
        "mock_identity": mocked,
        "switchable_users": directory.all() if mocked else [],
    }

"""Who acts: one plain value made once at each edge (a request, a task, a command) and handed to
services, selectors and access checks by keyword (docs/ARCHITECTURE.md §3 "The actor").

Pages read `request.identity`, API views DRF's `request.user`, tasks and commands a stored user
id: each edge turns what it has into an `Actor` here, and nothing below the edge asks again.
crudgen's `Actor` protocol (`user_id`, `is_staff`) is satisfied by it, so a generated route, a
page and a scheduled run put the same question to a resource's access policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from collab.identity import DjangoUserDirectory, MockUserProvider, get_user_directory, get_user_provider


@dataclass(frozen=True)
class Actor:
    """Someone acting now. `user_id` is blank for nobody (an anonymous request): nobody sees
    anything private. Staff see and change everything an access module guards."""

    user_id: str
    is_staff: bool = False

    @property
    def is_someone(self) -> bool:
        return bool(self.user_id)

    def is_user(self, user_id: str | None) -> bool:
        """Whether `user_id` (a creator, a payer, a recipient) is this actor; nobody is nobody's."""
        return bool(self.user_id) and user_id == self.user_id


NOBODY = Actor(user_id="")

_MEMO = "_workspace_actor"


def actor_of(request: Any) -> Actor:
    """The actor of a page's request (`request.identity`, set by the identity middleware) or of an
    API view's (DRF's `request.user`, which DRF authenticated from that identity), made once and
    kept on the request."""
    memo = request.__dict__.get(_MEMO)
    if memo is not None:
        return memo
    if _is_drf(request):
        user = request.user
        actor = Actor(user.id, bool(user.is_staff)) if getattr(user, "is_authenticated", False) else NOBODY
    else:
        identity = getattr(request, "identity", None)
        actor = NOBODY if identity is None else Actor(identity.user_id or "", bool(identity.is_staff))
    request.__dict__[_MEMO] = actor
    return actor


def _is_drf(request: Any) -> bool:
    # Not an import of DRF's Request: pages must not load DRF's settings to know who acts.
    return hasattr(request, "_request") and hasattr(request, "successful_authenticator")


def actor_now(user_id: str) -> Actor | None:
    """The actor of work done for `user_id` off the request path (a scheduled run, a task, a
    personal API token), read in the directory at the moment of use: None when they have left it,
    so removed access takes effect; staff only while they still are."""
    if not user_id:
        return None
    if isinstance(get_user_provider(), MockUserProvider):
        if get_user_directory().get(user_id) is None:
            return None
        return Actor(user_id, user_id in settings.WORKSPACE_MOCK_STAFF)
    from django.contrib.auth import get_user_model

    users = get_user_model().objects.filter(username=user_id, is_active=True)
    directory = get_user_directory()
    if isinstance(directory, DjangoUserDirectory):
        # One indexed lookup: this runs on every request a personal API token makes.
        row = users.values_list("is_staff").first()
        return None if row is None else Actor(user_id, bool(row[0]))
    if directory.get(user_id) is None:
        return None
    return Actor(user_id, users.filter(is_staff=True).exists())


def admin_actor(request: Any) -> Actor:
    """The actor of a Django admin request: the signed-in Django user, whom admin lets in only as
    staff (in mock mode too, where `request.identity` may name someone else)."""
    return Actor(request.user.get_username(), is_staff=True)

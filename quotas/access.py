"""Who may see and change the per-user resource overrides, for an actor: staff, and only staff
(decided once, in `override_rights`). One person's override (`override_for`), many
(`override_rights`) and the SQL scope of a list (`override_scope`). Anyone else learns nothing, not
even that the overrides exist: 404, never 403."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import QuerySet
from django.http import Http404

from collab.actor import Actor
from quotas.models import UserResourceOverride


def override_rights(user_ids: Iterable[str], *, actor: Actor) -> set[str]:
    """The users among `user_ids` whose overrides `actor` may see and change: all of them for
    staff, none for anyone else."""
    return set(user_ids) if actor.is_staff else set()


def override_scope(*, actor: Actor) -> QuerySet[UserResourceOverride]:
    """The scope of a list of overrides, in SQL: every override for staff, none for anyone else."""
    return UserResourceOverride.objects.all() if actor.is_staff else UserResourceOverride.objects.none()


def overrides_or_404(*, actor: Actor) -> None:
    """The guard of the staff-only overrides endpoints, before anything else is read: 404 unless
    `actor` may manage overrides."""
    if not actor.is_staff:
        raise Http404("Not found.")


def override_for(user_id: str, *, actor: Actor, lock: bool = False) -> UserResourceOverride | None:
    """`user_id`'s override row, if `actor` may manage it (`lock`: held until commit); None when
    they have none (the site defaults apply). Anyone who may not is 404."""
    if user_id not in override_rights([user_id], actor=actor):
        raise Http404("Not found.")
    rows = UserResourceOverride.objects.select_for_update() if lock else UserResourceOverride.objects.all()
    return rows.filter(user_id=user_id).first()

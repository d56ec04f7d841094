"""Fetch-and-authorise helpers: an unknown app, a missing item and someone else's item all 404."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from django.http import Http404

from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import Item

# Given item ids of one app and a user, the ids among them the user may see without having created
# them (an investigation's members). Apps built on items register one at start-up, so items never
# import them.
SharedWith = Callable[[Sequence[int], str], set[int]]
_shared_with: dict[str, SharedWith] = {}


def register_shared_with(*, app_slug: str, lookup: SharedWith) -> None:
    _shared_with[app_slug] = lookup


def shared_with(items: Iterable[tuple[int, str]], user_id: str) -> set[int]:
    """The ids among `items` ((id, app slug) pairs) their apps share with `user_id`: one query per
    app that shares, none for the rest."""
    by_app: dict[str, list[int]] = {}
    for item_id, app_slug in items:
        if app_slug in _shared_with:
            by_app.setdefault(app_slug, []).append(item_id)
    shared: set[int] = set()
    for app_slug, item_ids in by_app.items():
        shared |= _shared_with[app_slug](item_ids, user_id)
    return shared


def app_or_404(slug: str) -> AppDescriptor:
    app = get_config().app(slug)
    if app is None:
        raise Http404(f"There is no app {slug!r}.")
    return app


def can_view(item: Item, *, user_id: str, is_staff: bool) -> bool:
    """The creator holds the permissions whatever `owner` says; staff see everything.

    An app may share its items further (an investigation's members see its item, so a mention's
    link opens for them); that costs one indexed lookup, and only when the caller is not the creator.
    """
    if is_staff or (bool(user_id) and item.created_by == user_id):
        return True
    return bool(user_id) and item.pk in shared_with([(item.pk, item.app_slug)], user_id)


def item_for_viewer(slug: str, item_id: int, *, user_id: str, is_staff: bool) -> tuple[AppDescriptor, Item]:
    """One query: the item of app `slug`, if the caller may see it."""
    app = app_or_404(slug)
    item = Item.objects.filter(pk=item_id, app_slug=slug).first()
    if item is None or not can_view(item, user_id=user_id, is_staff=is_staff):
        raise Http404("No such item.")
    return app, item

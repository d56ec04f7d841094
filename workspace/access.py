"""Fetch-and-authorise helpers: an unknown app, a missing item and someone else's item all 404."""

from __future__ import annotations

from django.http import Http404

from workspace.config import AppDescriptor, get_config
from workspace.models import InvestigationMember, Item


def app_or_404(slug: str) -> AppDescriptor:
    app = get_config().app(slug)
    if app is None:
        raise Http404(f"There is no app {slug!r}.")
    return app


def can_view(item: Item, *, user_id: str, is_staff: bool) -> bool:
    """The creator holds the permissions whatever `owner` says; staff see everything.

    An investigation's members see its item too (DESIGN.md §5), so a mention's link opens for
    them; that costs one indexed lookup, and only when the caller is not the creator.
    """
    if is_staff or (bool(user_id) and item.created_by == user_id):
        return True
    return (
        bool(user_id)
        and item.app_slug == "rca"
        and InvestigationMember.objects.filter(investigation_id=item.pk, user_id=user_id).exists()
    )


def item_for_viewer(slug: str, item_id: int, *, user_id: str, is_staff: bool) -> tuple[AppDescriptor, Item]:
    """One query: the item of app `slug`, if the caller may see it."""
    app = app_or_404(slug)
    item = Item.objects.filter(pk=item_id, app_slug=slug).first()
    if item is None or not can_view(item, user_id=user_id, is_staff=is_staff):
        raise Http404("No such item.")
    return app, item

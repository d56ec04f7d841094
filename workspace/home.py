"""The home page: a person's dashboard over every area (the project package may read them all).

Each part comes from its area's own selector and is bounded, so the page costs the same handful
of queries however much a person holds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from collab import selectors as collab_selectors
from collab.actor import actor_of
from collab.identity import get_user_directory
from collab.web import identity_required
from knowledge.selectors import chats_shared_with
from quotas.pages import usage_rows
from quotas.selectors import resources_at_a_glance
from workspace.items.config import get_config
from workspace.items.links import item_page
from workspace.items.selectors import items_of_creator

HOME_ITEMS = 8
HOME_CHATS = 6
HOME_NOTIFICATIONS = 5


@dataclass(frozen=True)
class GlanceRow:
    """One line of a dashboard list: what it is, where it is, and when it last mattered."""

    title: str
    url: str
    note: str
    moment_label: str
    moment: datetime


@dataclass(frozen=True)
class Dashboard:
    items: list[GlanceRow]
    shared_chats: list[GlanceRow]
    resources: list[dict[str, object]]
    unread: collab_selectors.Inbox


def home_dashboard(*, user_id: str) -> Dashboard:
    apps = get_config().apps
    directory = get_user_directory()
    items = [
        GlanceRow(
            title=item.title,
            url=item_page(item.app_slug, item.pk),
            note=apps[item.app_slug].name if item.app_slug in apps else item.app_slug,
            moment_label="created",
            moment=item.created_at,
        )
        for item in items_of_creator(user_id=user_id, limit=HOME_ITEMS)
    ]
    chats = [
        GlanceRow(
            title=chat.title,
            url=reverse("kb-chat", args=[chat.pk]),
            note=f"from {creator.name if (creator := directory.get(chat.created_by)) else chat.created_by}",
            moment_label="active",
            moment=chat.updated_at,
        )
        for chat in chats_shared_with(user_id=user_id, limit=HOME_CHATS)
    ]
    unread = collab_selectors.inbox(
        user_id=user_id, limit=HOME_NOTIFICATIONS, shown=collab_selectors.InboxFilter(unread_only=True)
    )
    return Dashboard(
        items=items,
        shared_chats=chats,
        resources=usage_rows(resources_at_a_glance(user_id=user_id)),
        unread=collab_selectors.inbox_for_display(unread),
    )


@identity_required
def home_page(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"dashboard": home_dashboard(user_id=actor_of(request).user_id)})

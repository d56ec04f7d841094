"""The home page: a person's dashboard over every area (the project package may read them all).

Each part comes from its area's own selector and is bounded, so the page costs the same handful
of queries however much a person holds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from collab import clock
from collab import selectors as collab_selectors
from collab.actor import actor_of
from collab.identity import get_user_directory
from collab.web import identity_required
from knowledge.selectors import chats_shared_with
from quotas.pages import usage_rows
from quotas.selectors import resources_at_a_glance
from workspace.items.config import get_config
from workspace.items.links import item_page
from workspace.items.models import HandoverEvent
from workspace.items.selectors import handover_news, items_of_creator, pending_handovers

HOME_ITEMS = 8
HOME_CHATS = 6
HOME_NOTIFICATIONS = 5
HOME_HANDOVERS = 5
# How long the requester of a handover sees its answer on their dashboard.
HANDOVER_NEWS_DAYS = 14


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
    # Handovers have no notification kind (the spec fixes them): these say what waits and what came of them.
    handovers: list[GlanceRow]
    handover_news: list[GlanceRow]


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
        handovers=_handovers_waiting(user_id),
        handover_news=_handover_news(user_id),
    )


def _name(user_id: str) -> str:
    person = get_user_directory().get(user_id)
    return person.name if person else user_id


def _handovers_waiting(user_id: str) -> list[GlanceRow]:
    """The bills someone asked `user_id` to take over; they answer on My resources."""
    answer_at = f"{reverse('my-resources')}#handovers"
    return [
        GlanceRow(
            title=handover.title,
            url=answer_at,
            note=f"{_name(handover.requested_by)} asks you to pay for it",
            moment_label="asked",
            moment=handover.requested_at or clock.now(),
        )
        for handover in pending_handovers(user_id=user_id, limit=HOME_HANDOVERS)
    ]


_OUTCOME_NOTES = {
    HandoverEvent.Outcome.ACCEPTED: "{who} accepted: they pay for it now",
    HandoverEvent.Outcome.DECLINED: "{who} declined: you still pay for it",
    HandoverEvent.Outcome.RETURNED: "{who} handed the bill back: you pay for it again",
}


def _handover_news(user_id: str) -> list[GlanceRow]:
    """What became of the handovers `user_id` asked for, or of bills handed back to them, lately."""
    since = clock.now() - timedelta(days=HANDOVER_NEWS_DAYS)
    return [
        GlanceRow(
            title=event.item.title,
            url=item_page(event.item.app_slug, event.item_id),
            note=_OUTCOME_NOTES[HandoverEvent.Outcome(event.outcome)].format(who=_name(event.by)),
            moment_label=HandoverEvent.Outcome(event.outcome).label,
            moment=event.at,
        )
        for event in handover_news(user_id=user_id, since=since, limit=HOME_HANDOVERS)
    ]


@identity_required
def home_page(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"dashboard": home_dashboard(user_id=actor_of(request).user_id)})

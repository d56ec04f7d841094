"""Investigation pages: the list with a create form, and one investigation's conversation."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from collab.actor import actor_of
from collab.selectors import mention_leading_to
from collab.web import attempt, identity_required
from workspace.agent.selectors import conversation_of_item
from workspace.agent.turns import answering_agent
from workspace.investigations import selectors, services
from workspace.investigations.access import (
    INVESTIGATION_APP,
    InvestigationRight,
    investigation_for,
    investigation_right_of,
)
from workspace.items.access import app_or_404


@identity_required
def investigations_page(request: HttpRequest) -> HttpResponse:
    actor = actor_of(request)
    if request.method == "POST":
        title = request.POST.get("title", "")
        members = [part for part in request.POST.get("members", "").replace(",", " ").split() if part]
        investigation = attempt(
            request, lambda: services.investigation_create(title=title, members=members, actor=actor)
        )
        if investigation is not None:
            return HttpResponseRedirect(reverse("investigation", args=[investigation.pk]))
    rows = selectors.investigations_for_user(actor=actor)
    return render(request, "investigations/investigations.html", {"investigations": rows})


@identity_required
def investigation_page(request: HttpRequest, investigation_id: int) -> HttpResponse:
    actor = actor_of(request)
    try:
        investigation = investigation_for(investigation_id, actor=actor)
    except Http404:
        if (landing := _not_a_member(request, investigation_id)) is not None:
            return landing
        raise
    members = investigation.member_ids
    right = investigation_right_of(creator=investigation.item.created_by, members=members, actor=actor)
    context = {
        "investigation": investigation,
        "item": investigation.item,
        "members": members,
        # Who can open the investigation: the mention picker warns about anyone else.
        "participants": [investigation.item.created_by, *members],
        "adds_members": right == InvestigationRight.OWN,
        "conversation": conversation_of_item(investigation.pk),
        "answering": answering_agent(app_or_404(INVESTIGATION_APP)),
        "moves": services.status_moves(investigation.status),
    }
    return render(request, "investigations/investigation.html", context)


def _not_a_member(request: HttpRequest, investigation_id: int) -> HttpResponse | None:
    """Someone mentioned in an investigation they may not open (a mention lets nobody in) still
    gets its 404, and what their notification already told them: who mentioned them, to ask to be
    added. Anyone never mentioned there gets the site's plain 404, learning nothing."""
    mention = mention_leading_to(user_id=actor_of(request).user_id, link=services.investigation_link(investigation_id))
    if mention is None:
        return None
    context = {"path": request.path, "mention": mention, "status": 404}
    return render(request, "investigations/not_a_member.html", context, status=404)

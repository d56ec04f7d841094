"""Identity and notification pages: the inbox, marking read, the user switcher, personal tokens."""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from collab import selectors, services, tokens
from collab.actor import actor_of
from collab.edge import flattened_detail
from collab.identity import get_user_directory, mock_identity_enabled
from collab.middleware import MOCK_SESSION_KEY
from collab.models import Notification
from collab.serializers import NotificationInboxQuerySerializer
from collab.web import attempt, identity_required, safe_next


@dataclass(frozen=True)
class FilterChoice:
    label: str
    href: str
    current: bool


def _filter_href(shown: selectors.InboxFilter) -> str:
    params = {"unread": "true"} if shown.unread_only else {}
    if shown.kind:
        params["kind"] = shown.kind
    return reverse("notifications") + (f"?{urlencode(params)}" if params else "")


def _filter_choices(shown: selectors.InboxFilter) -> dict[str, list[FilterChoice]]:
    """Links, not a form: a filtered list can be bookmarked, shared and opened in a new tab."""
    kinds = [kind for kind in Notification.Kind if kind in Notification.PRODUCED_KINDS or kind == shown.kind]
    by_kind = [
        selectors.InboxFilter(unread_only=shown.unread_only),
        *(selectors.InboxFilter(unread_only=shown.unread_only, kind=kind) for kind in kinds),
    ]
    return {
        "read": [
            FilterChoice("Unread", _filter_href(replace(shown, unread_only=True)), shown.unread_only),
            FilterChoice("All", _filter_href(replace(shown, unread_only=False)), not shown.unread_only),
        ],
        "kind": [
            FilterChoice(
                f"{Notification.Kind(option.kind).label}s" if option.kind else "Every kind",
                _filter_href(option),
                option.kind == shown.kind,
            )
            for option in by_kind
        ],
    }


@identity_required
def notifications_page(request: HttpRequest) -> HttpResponse:
    query = NotificationInboxQuerySerializer(data=request.GET)
    if query.is_valid():
        shown = query.shown()
    else:
        shown = selectors.EVERYTHING
        messages.error(request, f"That filter cannot be read ({flattened_detail(query.errors)}); showing everything.")
    inbox = selectors.inbox(user_id=actor_of(request).user_id, limit=selectors.INBOX_MAX_LIMIT, shown=shown)
    context = {"inbox": selectors.inbox_for_display(inbox), "shown": shown, "filters": _filter_choices(shown)}
    return render(request, "collab/notifications.html", context)


@require_POST
@identity_required
def notification_read_page(request: HttpRequest, notification_id: int) -> HttpResponse:
    services.notification_mark_read(notification_id=notification_id, actor=actor_of(request))
    return HttpResponseRedirect(safe_next(request, reverse("notifications")))


@require_POST
@identity_required
def notifications_read_all_page(request: HttpRequest) -> HttpResponse:
    marked = services.notifications_mark_all_read(user_id=actor_of(request).user_id)
    messages.success(request, f"Marked {marked} notification{'s' if marked != 1 else ''} read.")
    return HttpResponseRedirect(safe_next(request, reverse("notifications")))


@require_POST
def switch_user(request: HttpRequest) -> HttpResponse:
    """The page header's user switcher; it exists only while identity is mocked."""
    if not mock_identity_enabled():
        raise Http404("The user switcher exists only with mock identity.")
    user_id = request.POST.get("user_id", "")
    user = get_user_directory().get(user_id)
    if user is None:
        messages.error(request, f"There is no user {user_id!r} in the directory.")
    else:
        request.session[MOCK_SESSION_KEY] = user.id
        messages.success(request, f"You are now acting as {user.name}.")
    return HttpResponseRedirect(safe_next(request, reverse("home")))


# The session key that carries a just-created token across the redirect after the POST, to the
# one GET that shows it; that GET removes it.
ISSUED_TOKEN_SESSION_KEY = "issued_token"


@identity_required
def tokens_page(request: HttpRequest) -> HttpResponse:
    """Lists the person's tokens. Creating one answers with a redirect (post/redirect/get, so a
    reload creates nothing), and the next GET shows the token once: it waits in the person's own
    session, never in a message or a URL, and is removed from it as it is shown."""
    actor = actor_of(request)
    if request.method == "POST":
        name, via_token = request.POST.get("name", ""), request.identity.source == "token"
        issued = attempt(request, lambda: tokens.token_create(actor=actor, name=name, via_token=via_token))
        if issued is not None:
            request.session[ISSUED_TOKEN_SESSION_KEY] = {"name": issued.row.name, "token": issued.token}
        return HttpResponseRedirect(reverse("me-tokens"))
    shown = request.session.pop(ISSUED_TOKEN_SESSION_KEY, None)
    response = render(request, "collab/tokens.html", {"tokens": tokens.tokens_of(actor=actor), "issued": shown})
    response["Cache-Control"] = "no-store"
    return response


@identity_required
@require_POST
def token_revoke_page(request: HttpRequest, token_id: int) -> HttpResponse:
    actor = actor_of(request)
    row = attempt(request, lambda: tokens.token_revoke(token_id=token_id, actor=actor))
    if row is not None:
        messages.success(request, f"Revoked {row.name}; scripts using it are refused from now on.")
    return HttpResponseRedirect(reverse("me-tokens"))

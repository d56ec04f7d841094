"""Page plumbing shared by every app: one path serves a browser HTML and an API client JSON, and a
form post's refusal becomes a message on the page (`attempt`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import csrf_exempt, csrf_protect

from collab.errors import DomainError

T = TypeVar("T")
View = Callable[..., HttpResponse]
_HTML_TYPES = ("text/html", "application/xhtml+xml")


def prefers_html(request: HttpRequest) -> bool:
    """True for browser navigations and form posts; API clients and fetch() get JSON.

    The spec gives one path to each resource (a notification links to `/kb/chats/<id>`), so the
    page and the API share it and the Accept header chooses.
    """
    for media_range in request.headers.get("Accept", "").split(","):
        media_type = media_range.split(";", 1)[0].strip().lower()
        if media_type in _HTML_TYPES:
            return True
        if media_type in ("application/json", "*/*"):
            return False
    return False


def html_or_api(*, page: View, api: View | type) -> View:
    """Dispatches to `page` (CSRF-protected) or `api` (DRF, which does its own CSRF check).

    `api` is a DRF view class or the view function its `as_view()` made.
    """
    if isinstance(api, type):
        api = api.as_view()
    protected_page = csrf_protect(page)

    @csrf_exempt
    def dispatch(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if prefers_html(request):
            return protected_page(request, *args, **kwargs)
        return api(request, *args, **kwargs)

    # The OpenAPI generator finds DRF views by these attributes; the API stays documented.
    for attribute in ("cls", "initkwargs"):
        if hasattr(api, attribute):
            setattr(dispatch, attribute, getattr(api, attribute))
    return dispatch


def identity_required(view: View) -> View:
    """Pages need someone: outside mock mode an anonymous visitor is sent to the login page."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        identity = getattr(request, "identity", None)
        if identity is None or not identity.user_id:
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapper


def attempt(request: HttpRequest, action: Callable[[], T]) -> T | None:
    """Runs a service for a form post; a refusal the person caused (a domain error) becomes an error
    message on the page they are sent back to, and the answer is None. A stranger's Http404 passes
    through to the site's 404 page (docs/ARCHITECTURE.md §12). An action whose success is None
    returns something else (`... or True`) so the caller can tell."""
    try:
        return action()
    except DomainError as exc:
        messages.error(request, str(exc.detail))
        return None


def rooted(link: str) -> str:
    """A spec path such as `/kb/chats/7`, placed under the configured root path."""
    if not link.startswith("/"):
        return link
    return f"{settings.WORKSPACE_ROOT_PATH}{link}"


def safe_next(request: HttpRequest, fallback: str) -> str:
    candidate = request.POST.get("next") or request.GET.get("next") or ""
    if candidate and url_has_allowed_host_and_scheme(candidate, allowed_hosts={request.get_host()}):
        return candidate
    return fallback

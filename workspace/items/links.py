"""Where a person sees an app's items: the items pages, unless a higher layer serves an app with
pages of its own (investigations serve `rca`) and registers them at start-up."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse


@dataclass(frozen=True)
class AppPages:
    list_url_name: str
    item_url_name: str


_own_pages: dict[str, AppPages] = {}


def register_app_pages(*, app_slug: str, list_url_name: str, item_url_name: str) -> None:
    _own_pages[app_slug] = AppPages(list_url_name=list_url_name, item_url_name=item_url_name)


def own_list_page(app_slug: str) -> str | None:
    """The app's own list page, where the items list page would show a second list."""
    pages = _own_pages.get(app_slug)
    return reverse(pages.list_url_name) if pages else None


def item_page(app_slug: str, item_id: int) -> str:
    pages = _own_pages.get(app_slug)
    if pages:
        return reverse(pages.item_url_name, args=[item_id])
    return reverse("ws-item", args=[app_slug, item_id])

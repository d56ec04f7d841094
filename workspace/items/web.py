"""An item's API views and pages fetch and authorise their item here, once, for the right they need."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, ClassVar

from django.http import HttpRequest, HttpResponse
from rest_framework.request import Request

from collab.actor import actor_of
from collab.api import ServiceApiView
from workspace.items.access import ItemRight, item_for
from workspace.items.config import AppDescriptor
from workspace.items.models import Item

_ITEM_METHODS = ("get", "post", "put", "patch", "delete")


class ItemApiView(ServiceApiView):
    # An API view about one item (its URL names `slug` and `item_id`): before a method runs, the
    # item is fetched and authorised for the right that method needs (`needs`, by method name; USE
    # unless it says otherwise), as `self.app` and `self.item`. No right at all is 404, the payer
    # asking for more than they have 403 `payer_only` (`access.item_for`). A comment, not a
    # docstring: the OpenAPI document describes a view without one of its own by its base's.

    needs: ClassVar[dict[str, ItemRight]] = {}
    app: AppDescriptor
    item: Item

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        # HEAD is the view's GET (Django's View); OPTIONS answers about the route, not the item; a
        # method the view does not have stays a 405, whoever asks.
        method = "get" if request.method == "HEAD" else request.method.lower()
        if method in _ITEM_METHODS and hasattr(self, method):
            need = self.needs.get(method, ItemRight.USE)
            self.app, self.item = item_for(kwargs["slug"], kwargs["item_id"], actor=actor_of(request), need=need)


ItemPage = Callable[..., HttpResponse]


def with_item(need: ItemRight = ItemRight.USE) -> Callable[[ItemPage], ItemPage]:
    """A page about one item: `view(request, app, item, ...)` gets the item of the URL's `slug` and
    `item_id`, fetched and authorised for `need` as `ItemApiView` does."""

    def decorate(view: ItemPage) -> ItemPage:
        @wraps(view)
        def page(request: HttpRequest, slug: str, item_id: int, *args: Any, **kwargs: Any) -> HttpResponse:
            app, item = item_for(slug, item_id, actor=actor_of(request), need=need)
            return view(request, app, item, *args, **kwargs)

        return page

    return decorate

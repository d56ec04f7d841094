"""One base for every API view: a walk over the URLconf finds no DRF view of ours that skips it."""

from __future__ import annotations

from collections.abc import Iterator

from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.views import APIView

from collab.api import ServiceApiView

# Views that are not ours to shape: crudgen is a library with its own base, the schema views are
# drf-spectacular's.
FOREIGN_PACKAGES = ("crudgen.", "drf_spectacular.", "rest_framework.")


def _view_classes(patterns: list, prefix: str = "") -> Iterator[tuple[str, type]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _view_classes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern) and isinstance(getattr(pattern.callback, "cls", None), type):
            yield prefix + str(pattern.pattern), pattern.callback.cls


def test_every_api_view_of_ours_extends_the_service_base_view():
    # Given every DRF view the URLconf routes to
    views = [
        (route, cls)
        for route, cls in _view_classes(get_resolver().url_patterns)
        if issubclass(cls, APIView) and not cls.__module__.startswith(FOREIGN_PACKAGES)
    ]
    assert len(views) > 40

    # When each is checked against the base view
    strays = sorted(
        f"{route} -> {cls.__module__}.{cls.__qualname__}" for route, cls in views if not issubclass(cls, ServiceApiView)
    )

    # Then none skips it
    assert strays == []

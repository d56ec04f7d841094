"""How large a request body a view takes, known before the body is read.

An app process reads a request's whole body before the view runs (spooled to disk past
FILE_UPLOAD_MAX_MEMORY_SIZE), and before it knows who sends it: so the body of a view that takes no
upload is refused past WORKSPACE_MAX_REQUEST_BODY_BYTES at once (413), and only the views marked
`takes_uploads` read up to the size of the largest file they store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings

View = TypeVar("View")

# What a multipart form wraps around a file (its boundaries and fields), beyond the file itself.
FORM_FRAMING_BYTES = 64 * 1024


def takes_uploads(limit: Callable[[], int]) -> Callable[[View], View]:
    """Marks a view (a function, or a DRF view class) whose bodies may be as large as `limit()`
    bytes (a file's size, from the settings; multipart framing is allowed for on top)."""

    def marked(view: View) -> View:
        view.largest_body = limit  # type: ignore[attr-defined]
        return view

    return marked


def body_limit(view: Any) -> int:
    """The most bytes of body the resolved view function `view` (an `as_view()`, an
    `html_or_api`, a page) reads."""
    for holder in (view, getattr(view, "view_class", None), getattr(view, "cls", None)):
        limit = getattr(holder, "largest_body", None)
        if limit is not None:
            return max(limit() + FORM_FRAMING_BYTES, settings.WORKSPACE_MAX_REQUEST_BODY_BYTES)
    return settings.WORKSPACE_MAX_REQUEST_BODY_BYTES

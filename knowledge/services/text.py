"""The checks of what people type for a collection or a chat (a name, a title, a description),
shared by the collections' and the chats' services."""

from __future__ import annotations

from collab.errors import Invalid

NAME_MAX = 200
DESCRIPTION_MAX = 5000


def checked_text(value: str, *, what: str, limit: int, required: bool = True) -> str:
    """The trimmed value, or 400 naming what is wrong with it (empty, or longer than `limit`)."""
    text = value.strip()
    if required and not text:
        raise Invalid(error="validation_error", detail=f"{what} cannot be empty.")
    if len(text) > limit:
        raise Invalid(error="validation_error", detail=f"{what} has {len(text)} characters; at most {limit}.")
    return text

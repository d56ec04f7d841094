"""The checks of what people type for a collection or a chat (a name, a title, a description, a
question), shared by the collections' and the chats' services."""

from __future__ import annotations

from collab.errors import Invalid

NAME_MAX = 200
DESCRIPTION_MAX = 5000
# A chat's question: every page that shows the chat renders it (Markdown costs about 10 µs for
# each `[`), so the page form is held to what the API takes.
QUESTION_MAX = 4000


def checked_text(value: str, *, what: str, limit: int, required: bool = True) -> str:
    """The trimmed value, or 400 naming what is wrong with it (empty, longer than `limit`, or with a
    NUL character, which no database stores: refused here, before anything is done with it)."""
    text = value.strip()
    if required and not text:
        raise Invalid(error="validation_error", detail=f"{what} cannot be empty.")
    if "\x00" in text:
        raise Invalid(error="validation_error", detail=f"{what} contains a NUL character; remove it.")
    if len(text) > limit:
        raise Invalid(error="validation_error", detail=f"{what} has {len(text)} characters; at most {limit}.")
    return text

"""A model's answer holds a server thread for as long as the model writes (up to
WORKSPACE_LLM_CONNECT_TIMEOUT + WORKSPACE_LLM_TIMEOUT), so, like a command, it holds one of the
person's request slots (WORKSPACE_EXEC_CONCURRENCY_PER_USER): one person cannot keep every thread
and the model server busy with questions asked at once. The slots are the workspace's, above this
layer: `workspace.items` installs them at start-up (docs/ARCHITECTURE.md §2, registries); without
them (the knowledge base alone) answers are not counted. A quoted answer takes milliseconds and
takes no slot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class RequestSlots:
    # take(user_id=, seconds=) -> a handle for `release`, or raises a DomainError (429) when all are taken.
    take: Callable[..., object]
    release: Callable[[object], None]


_installed: list[RequestSlots] = []


def install_request_slots(slots: RequestSlots) -> None:
    _installed[:] = [slots]


def answer_slot_take(*, user_id: str) -> object | None:
    """One of the person's request slots while a model writes the answer; None without a model."""
    if not _installed or not settings.WORKSPACE_LLM_BASE_URL:
        return None
    seconds = settings.WORKSPACE_LLM_CONNECT_TIMEOUT + settings.WORKSPACE_LLM_TIMEOUT
    return _installed[0].take(user_id=user_id, seconds=seconds)


def answer_slot_release(slot: object | None) -> None:
    if slot is not None and _installed:
        _installed[0].release(slot)

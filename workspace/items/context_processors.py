"""Template context every workspace page may need."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from workspace.items.selectors import pending_handover_count
from workspace.sandboxes.boundary import configured_boundary


def sandbox_boundary(request: HttpRequest) -> dict[str, Any]:
    """`sandbox_unconfined`: the local backend runs without bubblewrap (DEBUG only), so item pages warn."""
    return {"sandbox_unconfined": not configured_boundary().enabled}


def handovers_waiting(request: HttpRequest) -> dict[str, Any]:
    """`handovers_waiting`: how many items someone asked this person to pay for (the header's badge),
    read only when the page shows it (a template that never asks costs no query)."""
    identity = getattr(request, "identity", None)
    user_id = identity.user_id if identity is not None else ""
    return {"handovers_waiting": SimpleLazyObject(lambda: pending_handover_count(user_id=user_id or ""))}

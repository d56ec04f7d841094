"""Template context every workspace page may need."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from workspace.sandboxes.boundary import configured_boundary


def sandbox_boundary(request: HttpRequest) -> dict[str, Any]:
    """`sandbox_unconfined`: the local backend runs without bubblewrap (DEBUG only), so item pages warn."""
    return {"sandbox_unconfined": not configured_boundary().enabled}

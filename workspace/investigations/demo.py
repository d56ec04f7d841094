"""Demo investigation: alice's, with bob and carol as members and carol mentioned."""

from __future__ import annotations

from collections.abc import Callable

from collab.actor import Actor
from workspace.investigations import services as investigation_services
from workspace.investigations.models import Investigation

DEMO_INVESTIGATION = "Checkout latency spike"


def load_investigation(say: Callable[[str], None]) -> None:
    if Investigation.objects.filter(item__created_by="alice", item__title=DEMO_INVESTIGATION).exists():
        return
    # carol is added as well as mentioned: a mention notifies, only the creator adds members.
    investigation = investigation_services.investigation_create(
        title=DEMO_INVESTIGATION, actor=Actor("alice"), members=["bob", "carol"]
    )
    investigation_services.mention_create(
        investigation_id=investigation.pk,
        actor=Actor("alice"),
        user_ids=["carol"],
        note="The p95 doubled after the 14:00 deploy; can you check the data pipeline?",
    )
    investigation_services.status_change(investigation_id=investigation.pk, actor=Actor("alice"), status="in_progress")
    say(f"created investigation {investigation.pk} {DEMO_INVESTIGATION!r} (members bob, carol)")


def load(*, say: Callable[[str], None]) -> None:
    """Idempotent: an investigation of the same title is left as it is."""
    load_investigation(say)

"""Where a new sandbox is admitted: the one place the quota gate runs before the ledger row exists."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from quotas import ledger
from quotas.models import SandboxActivity
from workspace.config import AppDescriptor, get_config
from workspace.models import Item


@dataclass(frozen=True)
class Admission:
    activity: SandboxActivity
    opened_here: bool  # False when another request opened the item's sandbox first


def before_sandbox_open(*, item: Item, app: AppDescriptor, backend: str) -> Admission:
    """Admits a new sandbox for `item` and records it, in one transaction.

    The quota gate belongs right after the item lock: it reads the owner's live rows, adds the
    incoming size and refuses with 507; because the new row is written in the same transaction,
    concurrent opens cannot both slip under a limit (DESIGN.md §8). Spec "Limits" 6: an item
    that already has a live sandbox is admitted without counting, which the re-check below does.
    """
    resources = app.resources
    size = ledger.ResolvedSize(
        cpu_cores=resources.cpu_cores, memory_bytes=resources.memory_bytes, pids_max=resources.pids_max
    )
    with transaction.atomic():
        # Lock order: the item row first (the quota layer adds the owner's lock after it), so two
        # opens for one item queue here instead of both opening a sandbox.
        Item.objects.select_for_update().filter(pk=item.pk).values_list("pk", flat=True).first()
        existing = ledger.live_row_of_item(item.pk)
        if existing is not None:
            return Admission(activity=existing, opened_here=False)
        activity = ledger.activity_open(
            item_id=item.pk,
            app_slug=item.app_slug,
            owner=item.debtor,
            backend=backend,
            size=size,
            lease=get_config().sandbox.lease,
        )
    return Admission(activity=activity, opened_here=True)

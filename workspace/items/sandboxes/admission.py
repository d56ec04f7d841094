"""Where a new sandbox is admitted: the quota gate and the new ledger row, in one transaction."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from quotas import ledger, services
from quotas.models import SandboxActivity
from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import Item, payer_of


@dataclass(frozen=True)
class Admission:
    activity: SandboxActivity
    opened_here: bool  # False when another request opened the item's sandbox first


def before_sandbox_open(*, item: Item, app: AppDescriptor, backend: str) -> Admission:
    """Admits a new sandbox for `item` and records it, in one transaction.

    The quota gate runs right after the item lock: it takes the payer's lock, reads the payer's
    live rows, adds the incoming size and refuses with 507; because the new row is written in
    the same transaction, concurrent opens cannot both slip under a limit (docs/ARCHITECTURE.md §8). Spec
    "Limits" 6: an item that already has a live sandbox is admitted without counting.
    """
    with transaction.atomic():
        # Lock order: the item row first, then (inside the gate) the payer's lock, so two opens
        # for one item queue here instead of both opening a sandbox.
        locked = Item.objects.select_for_update().filter(pk=item.pk).values_list("owner", "created_by").first()
        # The payer as of the lock, not as the caller loaded it: a change of payer that committed
        # meanwhile decides who pays.
        payer = payer_of(owner=locked[0], creator=locked[1]) if locked else item.payer
        existing = ledger.live_row_of_item(item.pk)
        if existing is not None:
            return Admission(activity=existing, opened_here=False)
        services.sandbox_admit(payer=payer, incoming=app.resources.sandbox)
        activity = ledger.activity_open(
            item_id=item.pk,
            app_slug=item.app_slug,
            payer=payer,
            backend=backend,
            size=app.resources.sandbox,
            lease=ledger.opening_lease(get_config().sandbox.lease),
        )
    return Admission(activity=activity, opened_here=True)

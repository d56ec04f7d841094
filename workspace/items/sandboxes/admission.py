"""Where a new sandbox is admitted: the quota gate and the new ledger row, in one transaction."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from quotas import ledger, services
from quotas.models import SandboxActivity
from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import Item


@dataclass(frozen=True)
class Admission:
    activity: SandboxActivity
    opened_here: bool  # False when another request opened the item's sandbox first


def incoming_sandbox(app: AppDescriptor) -> services.IncomingSandbox:
    """What a new sandbox of `app` is charged: its resolved size, a cost only if the app declares one."""
    resources = app.resources
    return services.IncomingSandbox(
        cpu_cores=resources.cpu_cores, memory_bytes=resources.memory_bytes, declares_cost=resources.declares_cost
    )


def sandbox_admission_check(*, item: Item, app: AppDescriptor) -> None:
    """Raises the 507 a new sandbox for `item` would get, without opening or recording anything.

    For paths that must refuse before they store anything (chat send refuses before the user
    message is stored, spec "Limits" 7) and open the sandbox later through `before_sandbox_open`,
    which checks again under the owner's lock. An item with a live sandbox always passes.
    """
    if ledger.live_row_of_item(item.pk) is not None:
        return
    services.sandbox_admit(owner=item.debtor, incoming=incoming_sandbox(app))


def before_sandbox_open(*, item: Item, app: AppDescriptor, backend: str) -> Admission:
    """Admits a new sandbox for `item` and records it, in one transaction.

    The quota gate runs right after the item lock: it takes the owner's lock, reads the owner's
    live rows, adds the incoming size and refuses with 507; because the new row is written in
    the same transaction, concurrent opens cannot both slip under a limit (docs/ARCHITECTURE.md §8). Spec
    "Limits" 6: an item that already has a live sandbox is admitted without counting.
    """
    resources = app.resources
    size = ledger.ResolvedSize(
        cpu_cores=resources.cpu_cores, memory_bytes=resources.memory_bytes, pids_max=resources.pids_max
    )
    with transaction.atomic():
        # Lock order: the item row first, then (inside the gate) the owner's lock, so two opens
        # for one item queue here instead of both opening a sandbox.
        locked = Item.objects.select_for_update().filter(pk=item.pk).values_list("owner", "created_by").first()
        # The debtor as of the lock, not as the caller loaded it: an owner change that committed
        # meanwhile decides who pays.
        owner = (locked[0] or locked[1]) if locked else item.debtor
        existing = ledger.live_row_of_item(item.pk)
        if existing is not None:
            return Admission(activity=existing, opened_here=False)
        services.sandbox_admit(owner=owner, incoming=incoming_sandbox(app))
        activity = ledger.activity_open(
            item_id=item.pk,
            app_slug=item.app_slug,
            owner=owner,
            backend=backend,
            size=size,
            lease=ledger.opening_lease(get_config().sandbox.lease),
            charges_cost=resources.declares_cost,
        )
    return Admission(activity=activity, opened_here=True)

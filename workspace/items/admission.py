"""Where a new sandbox is admitted: the quota gate and the new ledger row, in one transaction."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction

from collab import clock
from collab.rows import PlannedStatement, answer_later, execute, pipelined_transaction, pipelines
from quotas import ledger, selectors, services
from quotas.models import SandboxActivity
from workspace.items import pool
from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import Item, payer_of

# The item's row locked, first in the lock order (`before_sandbox_open`), in a pipeline.
_LOCK_ITEM = PlannedStatement(
    "items_admission_lock_item", f"SELECT owner, created_by FROM {Item._meta.db_table} WHERE id = %s FOR UPDATE"
)
# How long the pipelined admission's locks may take before its reads count as too old.
_LOCK_WAIT_TOLERATED = timedelta(milliseconds=50)


@dataclass(frozen=True)
class Admission:
    activity: SandboxActivity
    opened_here: bool  # False when another request opened the item's sandbox first


def before_sandbox_open(
    *, item: Item, app: AppDescriptor, backend: str, excluding_hosts: Collection[str] = ()
) -> Admission:
    """Admits a new sandbox for `item` and records it, in one transaction.

    The quota gate runs right after the item lock: it takes the payer's lock, reads the payer's
    live rows, adds the incoming size and refuses with 507; because the new row is written in
    the same transaction, concurrent opens cannot both slip under a limit (docs/ARCHITECTURE.md §8). Spec
    "Limits" 6: an item that already has a live sandbox is admitted without counting. On the http
    backend the sandbox is then placed on a host of the pool (`pool.placed_host`, not one of
    `excluding_hosts`), under the pool's locks, taken last.
    """
    connection = transaction.get_connection()
    # Placement reads and locks the pool: the pipelined form knows nothing of it.
    if pipelines(connection) and backend != "http":
        admitted = _admitted_in_two_round_trips(item=item, app=app, backend=backend)
        if admitted is not None:
            return admitted
    with transaction.atomic():
        # Lock order: the item row first, then (inside the gate) the payer's lock, so two opens
        # for one item queue here instead of both opening a sandbox.
        locked = Item.objects.select_for_update().filter(pk=item.pk).values_list("owner", "created_by").first()
        payer = _payer_as_locked(item, locked)
        existing = ledger.live_row_of_item(item.pk)
        if existing is not None:
            return Admission(activity=existing, opened_here=False)
        services.sandbox_admit(payer=payer, incoming=app.resources.sandbox)
        host = pool.placed_host(size=app.resources.sandbox, excluding=excluding_hosts) if backend == "http" else ""
        activity = _new_row_sent(item=item, app=app, payer=payer, backend=backend, host=host)()
    return Admission(activity=activity, opened_here=True)


def _payer_as_locked(item: Item, locked: tuple[str, str] | None) -> str:
    """The payer as of the item's lock (its owner and creator columns), not as the caller loaded
    it: a change of payer that committed meanwhile decides who pays."""
    return payer_of(owner=locked[0], creator=locked[1]) if locked else item.payer


def _new_row_sent(
    *, item: Item, app: AppDescriptor, payer: str, backend: str, host: str = ""
) -> Callable[[], SandboxActivity]:
    return ledger.activity_open_sent(
        item_id=item.pk,
        app_slug=item.app_slug,
        payer=payer,
        backend=backend,
        host=host,
        size=app.resources.sandbox,
        lease=ledger.opening_lease(get_config().sandbox.lease),
    )


class _TheGeneralWay(Exception):
    """What the pipelined admission assumed did not hold: nothing of it is kept, and the
    admission runs as a transaction of Django's."""


def _admitted_in_two_round_trips(*, item: Item, app: AppDescriptor, backend: str) -> Admission | None:
    """`before_sandbox_open` on PostgreSQL in two round trips instead of five to seven: the item's
    lock, its live row and (where a limit binds) the payer's lock and usage go to the server
    together, the payer taken to be the one the caller loaded; the new row goes with the COMMIT.
    The locks are taken in the same order, so concurrent admissions queue as before. None
    (rolled back, nothing kept) where the item's payer changed meanwhile or the payer has no lock
    row yet (their first admission), or where the locks were waited for: the general way then
    decides. Unlike the general way it locks the payer (where a limit binds) before it knows
    that the item has a live row, which it then hands over: that admission may queue behind the
    payer's others, for as long as one takes."""
    payer = item.payer
    bound = services.sandbox_limits_binding(payer=payer, incoming=app.resources.sandbox)
    connection = transaction.get_connection()
    connection.ensure_connection()  # a new connection's set-up is no wait for the locks
    sent_at = clock.now()
    try:
        with pipelined_transaction(connection, durable=True):
            locked = answer_later(_LOCK_ITEM, [item.pk], connection=connection)
            live = ledger.live_row_of_item_sent(item.pk)
            payer_locked = services.payer_lock_sent(payer=payer) if bound else None
            usage = selectors.payer_sandbox_usage_sent(payer=payer) if bound else None
            row = locked()
            # The live row and the usage were asked for as of `sent_at`; where the locks were
            # waited for, a lease may have run out meanwhile, which the general way (asking once
            # they are held) would not count.
            if clock.now() - sent_at > _LOCK_WAIT_TOLERATED:
                raise _TheGeneralWay
            if _payer_as_locked(item, row) != payer:
                raise _TheGeneralWay
            existing = live()
            if existing is not None:
                execute(connection, "COMMIT")
                return Admission(activity=existing, opened_here=False)
            if payer_locked is not None and usage is not None:
                if not payer_locked():
                    raise _TheGeneralWay
                refusal = services.sandbox_refusal(payer=payer, bound=bound, usage=usage())
                if refusal is not None:
                    raise refusal
            opened = _new_row_sent(item=item, app=app, payer=payer, backend=backend)
            execute(connection, "COMMIT")
    except _TheGeneralWay:
        return None
    return Admission(activity=opened(), opened_here=True)

"""Writes and gates of the quotas: sandbox admission, per-user overrides, closing from my-resources."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection, transaction

from collab.actor import Actor
from collab.errors import NotFound, QuotaExceeded
from collab.rows import PlannedStatement, answer_later
from collab.sizes import format_bytes
from quotas import host, selectors
from quotas.access import override_for
from quotas.limits import forget_override, limits_for
from quotas.models import AdmissionLock, UserResourceOverride
from quotas.values import OverrideValues, SandboxSize, UserLimits

# Sums of fractional cores (0.1 + 0.2) must not refuse a sandbox that fits exactly.
_CPU_TOLERANCE = 1e-9
_PAYER_LOCK = PlannedStatement(
    "quotas_payer_lock", f"SELECT owner FROM {AdmissionLock._meta.db_table} WHERE owner = %s FOR UPDATE"
)
# (dimension, what the incoming sandbox brings, the limit) of each limit a new sandbox is subject to.
Binding = list[tuple[str, float, float]]


def quota_error(refusals: list[QuotaExceeded]) -> QuotaExceeded:
    """The first binding limit, the others under `also` (docs/ARCHITECTURE.md §5); never Retry-After."""
    first, *others = refusals
    if not others:
        return first
    return QuotaExceeded(error=first.error, detail=first.detail, **first.extra, also=others)


def _shown(dimension: str, value: float) -> str:
    if dimension == "memory":
        return format_bytes(value)
    if dimension == "cpu":
        return f"{value:g} core" if value == 1 else f"{value:g} cores"
    return f"{int(value)}"


def _sandbox_refusal(*, payer: str, dimension: str, used: float, incoming: float, limit: float) -> QuotaExceeded:
    label = "sandboxes" if dimension == "sandboxes" else dimension
    detail = (
        f"Opening a sandbox would exceed {payer}'s {label} limit: {_shown(dimension, used)} of "
        f"{_shown(dimension, limit)} in use, and this sandbox needs {_shown(dimension, incoming)}. "
        "Close a sandbox on My resources to make room."
    )
    return QuotaExceeded(
        error="sandbox_quota_exceeded",
        detail=detail,
        dimension=dimension,
        used=used,
        limit=limit,
        requested=incoming,
        owner=payer,
    )


def _bound_dimensions(limits: UserLimits, incoming: SandboxSize) -> Binding:
    """(dimension, incoming, limit) for each limit this sandbox is subject to, in the refusal order.

    Count applies to every app; cpu and memory only to apps that declare a cost, and only where
    the sandbox brings a positive amount (an unspecified or unlimited size adds nothing to sum).
    """
    bound: Binding = []
    if limits.count is not None:
        bound.append(("sandboxes", 1, limits.count))
    if incoming.declares_cost:
        if limits.cpu is not None and (incoming.cpu_cores or 0) > 0:
            bound.append(("cpu", float(incoming.cpu_cores or 0), limits.cpu))
        if limits.memory is not None and (incoming.memory_bytes or 0) > 0:
            bound.append(("memory", int(incoming.memory_bytes or 0), limits.memory))
    return bound


def _lock_payer(payer: str) -> None:
    """Serialises admissions of one payer until the caller's transaction ends.

    Lock order: the caller has locked the item row already; the payer's lock comes second,
    everywhere, so two admissions cannot wait on each other in a cycle. SQLite needs nothing:
    its writers already run one at a time (BEGIN IMMEDIATE).
    """
    if not connection.features.has_select_for_update:
        return
    if not payer_lock_sent(payer=payer)():
        # First admission of this payer: ON CONFLICT DO NOTHING lets concurrent first-timers
        # both continue, and the SELECT below then queues them on the one row.
        AdmissionLock.objects.bulk_create([AdmissionLock(owner=payer)], ignore_conflicts=True)
        payer_lock_sent(payer=payer)()


def payer_lock_sent(*, payer: str) -> Callable[[], bool]:
    """Locks the payer's admission row (FOR UPDATE, held until the transaction ends), its answer
    read when the function it returns is called: True when the row was there and is locked now,
    False before the payer's first admission (`_lock_payer` makes the row)."""
    row = answer_later(_PAYER_LOCK, [payer], connection=connection)
    return lambda: row() is not None


def sandbox_admit(*, payer: str, incoming: SandboxSize) -> None:
    """Refuses (507 `sandbox_quota_exceeded`) a new sandbox that would take `payer` over a limit.

    Run it inside the transaction that then records the new activity row: the payer's lock is
    held until that commits, so concurrent opens cannot both slip under a limit (docs/ARCHITECTURE.md §8).
    `used + incoming > limit` refuses; exactly at the limit is admitted. With no limit that
    binds this sandbox it costs no query beyond the memoised override lookup.
    """
    bound = sandbox_limits_binding(payer=payer, incoming=incoming)
    if not bound:
        return
    # No savepoint (two more statements per gate); the refusal is raised outside the block so
    # a caller's transaction stays usable, e.g. to record that a scheduled run was refused.
    with transaction.atomic(savepoint=False):
        _lock_payer(payer)
        usage = selectors.payer_sandbox_usage(payer=payer)
    refusal = sandbox_refusal(payer=payer, bound=bound, usage=usage)
    if refusal is not None:
        raise refusal


def sandbox_limits_binding(*, payer: str, incoming: SandboxSize) -> Binding:
    """(dimension, incoming, limit) of each of the payer's limits a new sandbox of `incoming` is
    subject to; empty when none binds it (the gate then has nothing to look at). No query beyond
    the memoised override lookup."""
    return _bound_dimensions(limits_for(payer), incoming)


def sandbox_refusal(*, payer: str, bound: Binding, usage: selectors.SandboxUsage) -> QuotaExceeded | None:
    """The refusal of a new sandbox by the limits `bound`, with the payer's live `usage` read under
    the payer's lock; None when it fits (exactly at a limit fits)."""
    used_of = {"sandboxes": usage.count, "cpu": usage.cpu, "memory": usage.memory}
    refusals = [
        _sandbox_refusal(payer=payer, dimension=dimension, used=used_of[dimension], incoming=amount, limit=limit)
        for dimension, amount, limit in bound
        if used_of[dimension] + amount > limit + (_CPU_TOLERANCE if dimension == "cpu" else 0)
    ]
    return quota_error(refusals) if refusals else None


@transaction.atomic
def override_set(*, user_id: str, values: OverrideValues, actor: Actor) -> UserResourceOverride:
    """Staff replace `user_id`'s override (PUT semantics: a dimension left out falls back to the
    default); anyone else is 404 (`override_for`), whoever calls."""
    row = override_for(user_id, actor=actor, lock=True)
    if row is None:
        row = UserResourceOverride(user_id=user_id)
        row.stamp_created(actor.user_id)
    else:
        row.stamp_updated(actor.user_id)
    row.count, row.cpu, row.memory, row.disk = values.count, values.cpu, values.memory, values.disk
    row.save()
    _forget_now_and_at_commit(user_id)
    return row


@transaction.atomic
def override_delete(*, user_id: str, actor: Actor) -> bool:
    """Staff revert `user_id` to the site defaults; False if there was no override. Anyone else is
    404 (`override_for`), whoever calls."""
    override_for(user_id, actor=actor, lock=True)
    deleted, _ = UserResourceOverride.objects.filter(user_id=user_id).delete()
    _forget_now_and_at_commit(user_id)
    return deleted > 0


def _forget_now_and_at_commit(user_id: str) -> None:
    # Now, so this request sees the change; again at commit, in case a concurrent request of
    # this process re-read the old row before the write became visible.
    forget_override(user_id)
    transaction.on_commit(lambda: forget_override(user_id))


def my_sandbox_close(*, actor: Actor, item_id: str) -> int:
    """Truly shuts down a sandbox `actor` pays for (my-resources); anything else is 404.

    Not atomic: shutting a sandbox down calls its backend, and the ledger steps commit on their own.
    """
    # An id with a NUL names no item, and is answered so before any query: PostgreSQL refuses
    # the NUL itself (a 400), SQLite finds nothing (a 404).
    if "\x00" in item_id or not selectors.payer_live_sandbox_exists(payer=actor.user_id, item_id=item_id):
        # Not yours and not live look the same, as everywhere (the API's 404 body is its usual one).
        raise NotFound(error="not_found", detail="Not found.")
    return host.installed().sandbox_close(item_id, closed_by=actor.user_id)

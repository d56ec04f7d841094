"""Reads of the quotas: an payer's live usage (one aggregate each), my-resources, the override lists."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from collab import clock
from collab.actor import Actor
from collab.rows import PlannedStatement, answer_later
from quotas import host, ledger
from quotas.limits import limits_for
from quotas.models import SandboxActivity, UserResourceOverride, WorkspaceDiskUsage
from quotas.values import OverrideValues, UserLimits, host_name

MY_DISK_ROWS = 500


@dataclass(frozen=True)
class SandboxUsage:
    """What an payer's live sandboxes hold; cpu and memory only of apps that declare a cost."""

    count: int
    cpu: float
    memory: int


@dataclass(frozen=True)
class LiveSandbox:
    ordinal: int
    item: str
    slug: str
    title: str
    url: str
    cores: float | None
    memory: int | None
    charges_cost: bool
    opened_at: datetime
    last_used_at: datetime
    host: str = ""  # the sandbox host it runs on (`host_name`); blank on the local backend


@dataclass(frozen=True)
class DiskOfItem:
    item: str
    slug: str
    title: str
    url: str
    bytes: int
    measured_at: datetime


@dataclass(frozen=True)
class MyResources:
    user_id: str
    limits: UserLimits
    usage: SandboxUsage
    live: list[LiveSandbox]
    disk_in_use: int
    disk_tracked: bool
    disk: list[DiskOfItem]
    handovers: list[host.Handover]
    paying_for: list[host.PaidItem]


# The two gate aggregates are written as SQL rather than built with the ORM: compiling the ORM
# query costs about fifteen times the indexed query itself, on a path every growing file write
# and every new sandbox takes (bench/quotas.py). Names come from the models, and
# tests/quotas/test_selectors.py holds both to the ORM's answer.
_ACTIVITY = SandboxActivity._meta.db_table
_DISK = WorkspaceDiskUsage._meta.db_table
_PAYER_SANDBOX_USAGE = PlannedStatement(
    "quotas_payer_sandbox_usage",
    "SELECT COUNT(*), SUM(CASE WHEN charges_cost THEN cpu_cores END), "
    f"SUM(CASE WHEN charges_cost THEN memory_bytes END) FROM {_ACTIVITY} "
    "WHERE owner = %s AND is_deleted = %s AND lease_expires_at > %s",
)


def payer_sandbox_usage(*, payer: str) -> SandboxUsage:
    """The admission gate's one query: an aggregate over the payer's live rows on `sbx_owner_live_idx`."""
    return payer_sandbox_usage_sent(payer=payer)()


def payer_sandbox_usage_sent(*, payer: str) -> Callable[[], SandboxUsage]:
    """`payer_sandbox_usage`, read when the function it returns is called (in a PostgreSQL
    pipelined transaction, the statement goes to the server with the statements sent after it)."""
    moment = connection.ops.adapt_datetimefield_value(clock.now())
    row = answer_later(_PAYER_SANDBOX_USAGE, [payer, False, moment], connection=connection)

    def usage() -> SandboxUsage:
        count, cpu, memory = row()
        return SandboxUsage(count=int(count), cpu=float(cpu or 0), memory=int(memory or 0))

    return usage


def payer_disk_bytes(*, payer: str, excluding_item: str | None = None) -> int:
    """Sum of the payer's last measurements (approximate, spec "Limits" 10), optionally without one item."""
    sql = f"SELECT SUM(bytes) FROM {_DISK} WHERE owner = %s AND is_deleted = %s"
    params: list[object] = [payer, False]
    if excluding_item is not None:
        sql += " AND item_id <> %s"
        params.append(excluding_item)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        (total,) = cursor.fetchone()
    return int(total or 0)


def my_resources(*, actor: Actor) -> MyResources:
    """Usage against limits for the person who pays: live sandboxes and measured disk, with item links."""
    user_id = actor.user_id
    limits = limits_for(user_id)
    live_rows = list(ledger.live_rows_of_payer(user_id).order_by("opened_at", "id"))
    disk_rows = list(WorkspaceDiskUsage.current.filter(owner=user_id).order_by("-bytes", "item_id")[:MY_DISK_ROWS])
    installed = host.installed()
    links = installed.describe_items(sorted({row.item_id for row in [*live_rows, *disk_rows]}), viewer=actor)

    def link(item_id: str, app_slug: str) -> host.ItemLink:
        return links.get(item_id) or host.ItemLink(item_id=item_id, app_slug=app_slug, title="(deleted item)", url="")

    live = [
        LiveSandbox(
            ordinal=ordinal,
            item=row.item_id,
            slug=row.app_slug,
            title=link(row.item_id, row.app_slug).title,
            url=link(row.item_id, row.app_slug).url,
            cores=row.cpu_cores,
            memory=row.memory_bytes,
            charges_cost=row.charges_cost,
            opened_at=row.opened_at,
            last_used_at=row.last_used_at,
            host=host_name(row.host),
        )
        for ordinal, row in enumerate(live_rows, start=1)
    ]
    disk = [
        DiskOfItem(
            item=row.item_id,
            slug=row.app_slug,
            title=link(row.item_id, row.app_slug).title,
            url=link(row.item_id, row.app_slug).url,
            bytes=row.bytes,
            measured_at=row.measured_at,
        )
        for row in disk_rows
    ]
    return MyResources(
        user_id=user_id,
        limits=limits,
        usage=payer_sandbox_usage(payer=user_id),
        live=live,
        disk_in_use=payer_disk_bytes(payer=user_id),
        disk_tracked=limits.disk is not None,
        disk=disk,
        handovers=installed.pending_handovers(user_id),
        paying_for=installed.paid_for_others(user_id),
    )


@dataclass(frozen=True)
class ResourcesAtAGlance:
    """What My resources sums up, without its per-item rows."""

    limits: UserLimits
    usage: SandboxUsage
    disk_in_use: int


def resources_at_a_glance(*, user_id: str) -> ResourcesAtAGlance:
    """Three indexed reads (the override is memoised), whatever the person holds: the home page's."""
    return ResourcesAtAGlance(
        limits=limits_for(user_id),
        usage=payer_sandbox_usage(payer=user_id),
        disk_in_use=payer_disk_bytes(payer=user_id),
    )


def payer_live_sandbox_exists(*, payer: str, item_id: str) -> bool:
    """Whether `payer` pays for a live sandbox of `item_id` (what my-resources may close)."""
    return ledger.live_rows_of_payer(payer).filter(item_id=item_id).exists()


@dataclass(frozen=True)
class OverrideListing:
    defaults: UserLimits
    overrides: list[UserResourceOverride]


@dataclass(frozen=True)
class LimitsOfUser:
    user_id: str
    override: UserResourceOverride | None
    effective: UserLimits
    defaults: UserLimits


def overrides_listing() -> OverrideListing:
    """The staff view of the per-user limits: site defaults, then every override by user id."""
    return OverrideListing(
        defaults=host.installed().site_limits(), overrides=list(UserResourceOverride.objects.order_by("user_id"))
    )


def override_of_user(*, user_id: str) -> LimitsOfUser:
    """One person: their override as written (None if none) and the limits that result."""
    row = UserResourceOverride.objects.filter(user_id=user_id).first()
    values = OverrideValues.of(row)
    site = host.installed().site_limits()
    return LimitsOfUser(
        user_id=user_id, override=row, effective=site if values is None else values.over(site), defaults=site
    )

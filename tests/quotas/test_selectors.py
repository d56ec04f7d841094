"""The gate aggregates (hand-written SQL) agree with the ORM on live, closed, expired and costless rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import Count, Q, Sum

from collab import clock as clock_module
from quotas import ledger, selectors
from quotas.models import SandboxActivity, WorkspaceDiskUsage

pytestmark = pytest.mark.django_db


def _row(owner, *, cpu, memory, charges_cost=True, expires_in=60, deleted=False, item="1"):
    now = clock_module.now()
    return SandboxActivity.objects.create(
        item_id=item,
        app_slug="notebook",
        owner=owner,
        backend="local",
        cpu_cores=cpu,
        memory_bytes=memory,
        charges_cost=charges_cost,
        lease_expires_at=now + timedelta(seconds=expires_in),
        is_deleted=deleted,
    )


def test_sandbox_usage_counts_live_rows_and_sums_only_costed_ones(clock):
    # Given alice's live, costless, closed, expired and unsized sandboxes, and bob's
    _row("alice", cpu=1.0, memory=100)
    _row("alice", cpu=0.5, memory=50)
    _row("alice", cpu=4.0, memory=400, charges_cost=False)  # counted, not summed
    _row("alice", cpu=8.0, memory=800, deleted=True)
    _row("alice", cpu=8.0, memory=800, expires_in=0)  # exactly at expiry: not live
    _row("alice", cpu=None, memory=None)
    _row("bob", cpu=2.0, memory=200)
    # When the gate's hand-written usage of alice is read
    usage = selectors.payer_sandbox_usage(payer="alice")
    # Then it agrees with the ORM: four live rows, with 1.5 cpu and 150 bytes summed from the costed ones
    orm = ledger.live_rows_of_payer("alice").aggregate(
        count=Count("id"),
        cpu=Sum("cpu_cores", filter=Q(charges_cost=True)),
        memory=Sum("memory_bytes", filter=Q(charges_cost=True)),
    )
    assert (usage.count, usage.cpu, usage.memory) == (orm["count"], orm["cpu"], orm["memory"]) == (4, 1.5, 150)


def test_sandbox_usage_of_nobody_is_zero(clock):
    # Given nobody with a sandbox
    # When the usage of nobody is read
    usage = selectors.payer_sandbox_usage(payer="nobody")
    # Then it is zero in each dimension
    assert (usage.count, usage.cpu, usage.memory) == (0, 0.0, 0)


def test_disk_bytes_sum_current_rows_of_the_owner_optionally_without_one_item():
    # Given alice's current disk rows of 10 and 20 bytes, a deleted one of 40, and bob's of 80
    WorkspaceDiskUsage.objects.create(item_id="1", app_slug="notebook", owner="alice", bytes=10)
    WorkspaceDiskUsage.objects.create(item_id="2", app_slug="notebook", owner="alice", bytes=20)
    WorkspaceDiskUsage.objects.create(item_id="3", app_slug="notebook", owner="alice", bytes=40, is_deleted=True)
    WorkspaceDiskUsage.objects.create(item_id="4", app_slug="notebook", owner="bob", bytes=80)
    # When alice's disk bytes are summed / Then only her current rows count
    assert selectors.payer_disk_bytes(payer="alice") == 30
    # When one of her items is left out / Then its bytes are too
    assert selectors.payer_disk_bytes(payer="alice", excluding_item="2") == 10
    # When carol's are summed / Then they are zero
    assert selectors.payer_disk_bytes(payer="carol") == 0

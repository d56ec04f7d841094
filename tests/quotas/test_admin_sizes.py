"""The ledgers in Django admin show sizes as the config writes them (`512M`), not byte counts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from collab import clock
from quotas.models import SandboxActivity, WorkspaceDiskUsage

pytestmark = pytest.mark.django_db


def _live_sandbox(*, memory: int) -> SandboxActivity:
    return SandboxActivity.objects.create(
        item_id="7",
        app_slug="notebook",
        owner="alice",
        backend="local",
        cpu_cores=1,
        memory_bytes=memory,
        lease_expires_at=clock.now() + timedelta(seconds=60),
    )


def test_the_sandbox_ledger_lists_memory_as_a_size(admin_client_logged_in) -> None:
    # Given a live sandbox of 512 MiB
    _live_sandbox(memory=512 * 1024**2)

    # When staff open the sandbox ledger in admin
    response = admin_client_logged_in.get(reverse("admin:quotas_sandboxactivity_changelist"))

    # Then its memory reads 512 MB, as every page shows sizes, not the byte count
    assert b"512 MB" in response.content
    assert b"536870912" not in response.content


def test_a_sandbox_rows_detail_page_shows_memory_as_a_size(admin_client_logged_in) -> None:
    # Given a live sandbox of 1 GiB
    row = _live_sandbox(memory=1024**3)

    # When staff open its detail page
    response = admin_client_logged_in.get(reverse("admin:quotas_sandboxactivity_change", args=[row.pk]))

    # Then its memory reads 1 GB
    assert response.status_code == 200
    assert b"1 GB" in response.content
    assert b"1073741824" not in response.content


def test_the_disk_ledger_lists_sizes(admin_client_logged_in) -> None:
    # Given a workspace measured at 3 MiB
    WorkspaceDiskUsage.objects.create(item_id="7", app_slug="notebook", owner="alice", bytes=3 * 1024**2)

    # When staff open the disk ledger in admin
    response = admin_client_logged_in.get(reverse("admin:quotas_workspacediskusage_changelist"))

    # Then the measurement reads 3 MB
    assert b"3 MB" in response.content
    assert b"3145728" not in response.content

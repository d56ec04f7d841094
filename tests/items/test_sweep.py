"""The mirror sweep: every item's workspace bytes go to the disk ledger in one hand-over."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from collab.actor import Actor
from quotas import ledger
from quotas.models import WorkspaceDiskUsage
from quotas.services import override_set
from quotas.values import OverrideValues
from workspace.sandboxes.filestore import workspace_dir

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def disk_limited(write_config):
    # Spec "Limits" 11: the sweep writes the disk ledger only for owners who have a disk limit.
    write_config('[resources.per_user]\ndisk = "10G"\n')


def test_sweep_measures_each_items_workspace(make_item, clock):
    # Given alice's notebook holding 1024 bytes in a file and a folder, and an empty one bob pays for
    first, second = make_item(), make_item(owner="bob")
    (workspace_dir(first.pk) / "a.bin").write_bytes(b"x" * 1000)
    (workspace_dir(first.pk) / "sub").mkdir()
    (workspace_dir(first.pk) / "sub" / "b.bin").write_bytes(b"y" * 24)
    # When the sweep runs
    call_command("sweep")
    # Then the ledger holds each workspace's bytes, with its owner and the time measured
    assert ledger.disk_usage_of_item(first.pk).bytes == 1024
    usage = ledger.disk_usage_of_item(second.pk)
    assert (usage.bytes, usage.owner, usage.measured_at) == (0, "bob", clock.now())


def test_sweep_updates_the_one_row_per_item(make_item, clock):
    # Given alice's notebook, swept once
    item = make_item()
    call_command("sweep")
    # When it grows to 10 bytes and the sweep runs again a minute later
    (workspace_dir(item.pk) / "a.bin").write_bytes(b"x" * 10)
    clock.advance(minutes=1)
    call_command("sweep")
    # Then its one ledger row is updated in place
    assert WorkspaceDiskUsage.objects.filter(item_id=str(item.pk)).count() == 1
    assert ledger.disk_usage_of_item(item.pk).bytes == 10


def test_sweep_hands_all_figures_to_the_ledger_function_once(make_item, monkeypatch):
    # Given two notebooks, and the ledger's hand-over watched
    make_item(), make_item()
    calls = []
    monkeypatch.setattr("quotas.ledger.record_disk_measurements", lambda figures: calls.append(list(figures)) or 0)
    # When the sweep runs
    call_command("sweep")
    # Then all figures reach the ledger in one call
    assert len(calls) == 1
    assert len(calls[0]) == 2


def test_item_detail_shows_the_last_measurement(alice_api, make_item):
    # Given alice's notebook of 7 bytes
    item = make_item()
    (workspace_dir(item.pk) / "a.bin").write_bytes(b"x" * 7)
    # When the sweep runs
    call_command("sweep")
    # Then the item's detail shows 7 bytes measured
    assert alice_api.get(f"/a/notebook/items/{item.pk}").json()["disk"]["bytes"] == 7


def test_sweep_walks_no_workspace_when_nobody_has_a_disk_limit(make_item, write_config, monkeypatch):
    # Given a config that gives nobody a disk limit, a notebook, and the workspace measure watched
    write_config("")
    make_item()
    walked: list[object] = []
    monkeypatch.setattr("workspace.sandboxes.filestore.workspace_bytes", lambda root: walked.append(root) or 0)

    # When the sweep runs
    call_command("sweep")

    # Then no workspace is walked and nothing is recorded
    assert walked == []
    assert not WorkspaceDiskUsage.objects.exists()


def test_sweep_walks_only_the_workspaces_of_owners_with_a_disk_limit(make_item, write_config, monkeypatch):
    # Given a per-user disk limit, alice's notebook, and bob's whose override lifts his disk limit
    write_config('[resources.per_user]\ndisk = "10G"\n')
    limited = make_item()
    override_set(user_id="bob", values=OverrideValues(disk=0), actor=Actor("alice", is_staff=True))
    make_item(owner="bob")
    walked: list[str] = []
    # When the sweep runs
    monkeypatch.setattr("workspace.sandboxes.filestore.workspace_bytes", lambda root: walked.append(root.name) or 0)

    # Then only alice's workspace is walked
    call_command("sweep")

    assert walked == [workspace_dir(limited.pk).name]

"""The liveness ledger: evidence and leases, idle reclaim, probes, and no revival after a close."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command

from quotas import ledger
from quotas.models import SandboxActivity
from quotas.values import SandboxSize
from tests.fixtures.items import item_url
from workspace.items import lifecycle
from workspace.items.admission import before_sandbox_open
from workspace.items.config import get_config
from workspace.sandboxes.base import SandboxUnavailable
from workspace.sandboxes.registry import backend_named

pytestmark = pytest.mark.django_db
LEASE = timedelta(seconds=90)


def _open(api, item) -> SandboxActivity:
    api.post(item_url(item, "/exec"), {"command": "true"}, format="json")
    return SandboxActivity.objects.get(item_id=str(item.pk), is_deleted=False)


def test_a_sandbox_is_live_until_its_evidence_is_older_than_the_lease(alice_api, make_item, clock):
    # Given alice's notebook whose sandbox a command opened, with a lease of 90 s
    item = make_item()
    _open(alice_api, item)
    # When 89 s pass
    clock.advance(seconds=89)
    # Then it still counts as live
    assert ledger.live_rows_of_payer("alice").count() == 1
    # When 2 s more pass
    clock.advance(seconds=2)
    # Then it no longer counts
    assert ledger.live_rows_of_payer("alice").count() == 0


def test_exec_activity_is_fresh_evidence(alice_api, make_item, clock):
    # Given alice's notebook whose sandbox a command opened
    item = make_item()
    _open(alice_api, item)
    # When she runs another command 60 s later, and 60 s more pass
    clock.advance(seconds=60)
    alice_api.post(item_url(item, "/exec"), {"command": "true"}, format="json")
    clock.advance(seconds=60)
    # Then the sandbox is still live: the command renewed its evidence
    assert ledger.live_row_of_item(item.pk) is not None


def test_a_late_heartbeat_never_revives_a_closed_sandbox(alice_api, make_item, clock):
    # Given alice's notebook whose sandbox a command opened, then she closed
    item = make_item()
    row = _open(alice_api, item)
    alice_api.delete(item_url(item, "/sandbox"))
    # When a late heartbeat for it arrives / Then it is refused
    assert ledger.heartbeat(activity_id=row.pk, lease=LEASE, used=True) is False
    # Then nothing is live and the row stays closed
    assert ledger.live_rows_of_payer("alice").count() == 0
    row.refresh_from_db()
    assert row.is_deleted


def test_closing_is_a_soft_delete_that_frees_without_a_decrement(alice_api, make_item):
    # Given alice's notebook whose sandbox a command opened
    item = make_item()
    _open(alice_api, item)
    # When she closes the sandbox
    alice_api.delete(item_url(item, "/sandbox"))
    # Then its row stays as history but no longer counts
    assert SandboxActivity.objects.count() == 1  # the history stays
    assert SandboxActivity.current.count() == 0


def test_closing_truly_stops_the_sandbox(alice_api, make_item):
    # Given alice's notebook whose sandbox a command opened, which the backend reports running
    item = make_item()
    row = _open(alice_api, item)
    backend = backend_named("local")
    assert backend.probe(row.backend_sandbox_id)
    # When she closes the sandbox
    alice_api.delete(item_url(item, "/sandbox"))
    # Then the backend no longer has it
    assert not backend.probe(row.backend_sandbox_id)


def test_a_probe_refreshes_the_evidence_of_a_sandbox_that_is_alive(alice_api, make_item, clock):
    # Given alice's notebook whose sandbox a command opened
    item = make_item()
    _open(alice_api, item)
    # When it is probed 80 s later
    clock.advance(seconds=80)
    # Then the probe finds it alive and refreshes it
    assert lifecycle.sandboxes_probe().refreshed == 1
    # When 80 s more pass
    clock.advance(seconds=80)
    # Then it is still live: the probe renewed its lease
    assert ledger.live_row_of_item(item.pk) is not None


def test_a_probe_forgets_a_sandbox_the_backend_lost(alice_api, make_item):
    # Given alice's open sandbox that the backend has lost
    item = make_item()
    row = _open(alice_api, item)
    backend_named("local").close(row.backend_sandbox_id)
    # When the sandboxes are probed / Then one is closed
    assert lifecycle.sandboxes_probe().closed == 1
    # Then its row is closed with the reason gone
    row.refresh_from_db()
    assert (row.is_deleted, row.close_reason) == (True, "gone")


def test_exec_after_the_backend_lost_the_sandbox_opens_a_new_one(alice_api, make_item):
    # Given alice's open sandbox that the backend has lost
    item = make_item()
    row = _open(alice_api, item)
    backend_named("local").close(row.backend_sandbox_id)
    # When she runs a command
    body = alice_api.post(item_url(item, "/exec"), {"command": "echo ok"}, format="json").json()
    # Then it runs, in a new sandbox
    assert body["stdout"] == "ok\n"
    assert body["sandbox_id"] != row.backend_sandbox_id


def _probe_every_minute(clock, *, minutes: int) -> None:
    for _ in range(minutes):
        clock.advance(minutes=1)
        lifecycle.sandboxes_probe()


def test_idle_reclaim_closes_sandboxes_unused_for_the_idle_period(alice_api, make_item, clock):
    # Given two of alice's sandboxes, idle and busy, both opened by a command
    idle, busy = make_item(title="idle"), make_item(title="busy")
    idle_row = _open(alice_api, idle)
    _open(alice_api, busy)
    # When 20 min of probes pass, she uses busy, and 11 min of probes more pass
    _probe_every_minute(clock, minutes=20)  # probes within the lease keep both alive but are not use
    alice_api.post(item_url(busy, "/exec"), {"command": "true"}, format="json")
    _probe_every_minute(clock, minutes=11)
    # When reclaim runs / Then it closes one sandbox
    assert lifecycle.sandboxes_reclaim().closed == 1
    # Then that is idle's: its row is closed as idle and its sandbox stopped, and busy stays live
    idle_row.refresh_from_db()
    assert (idle_row.is_deleted, idle_row.close_reason) == (True, "idle")
    assert not backend_named("local").probe(idle_row.backend_sandbox_id)
    assert ledger.live_row_of_item(busy.pk) is not None


def test_an_expired_sandbox_is_shut_down_before_a_replacement_opens(alice_api, make_item, clock):
    # Given alice's open sandbox
    item = make_item()
    old = _open(alice_api, item)
    # When she runs a command 5 min later, long after its lease ran out
    clock.advance(minutes=5)
    body = alice_api.post(item_url(item, "/exec"), {"command": "true"}, format="json").json()
    # Then a new sandbox is opened, and the old one is closed as expired and stopped first
    assert body["sandbox_opened"] is True
    old.refresh_from_db()
    assert (old.is_deleted, old.close_reason) == (True, "expired")
    assert not backend_named("local").probe(old.backend_sandbox_id)


def test_the_worker_runs_probes_reclaim_and_the_sweep_once(alice_api, make_item, clock, capsys, write_config):
    # Given a per-user disk limit (the sweep measures only owners with one) and alice's open sandbox
    write_config('[resources.per_user]\ndisk = "10G"\n')  # the sweep measures only owners with a disk limit
    item = make_item()
    row = _open(alice_api, item)
    # When the worker runs once, 31 min later
    clock.advance(minutes=31)
    call_command("worker", "--once")
    # Then the idle sandbox is reclaimed and the disk sweep measured her workspace
    row.refresh_from_db()
    assert row.is_deleted
    assert "measured 1" in capsys.readouterr().out


def test_every_ledger_query_filters_soft_deleted_rows():
    # Given the ledger module's source
    # When it is read
    source = Path(ledger.__file__).read_text()
    # Then it never queries the manager that includes closed rows
    assert "SandboxActivity.objects.filter" not in source
    assert "SandboxActivity.objects.exclude" not in source


def test_a_sandbox_that_never_finished_opening_stops_counting_after_the_opening_lease(make_item, clock):
    # Given alice's notebook whose sandbox admission recorded but never finished opening
    item = make_item()
    before_sandbox_open(item=item, app=get_config().app(item.app_slug), backend="local")
    # Then it counts as live at first
    assert ledger.live_rows_of_payer("alice").count() == 1

    # When the 30 s opening lease passes
    clock.advance(seconds=31)

    # Then it no longer counts
    assert ledger.live_rows_of_payer("alice").count() == 0


def test_an_opened_sandbox_holds_the_full_lease_from_when_it_opened(alice_api, make_item, clock):
    # Given alice's notebook
    item = make_item()
    # When a command opens its sandbox
    activity = _open(alice_api, item)

    # Then its lease runs the full 90 s from when it was last seen
    assert activity.lease_expires_at - activity.last_seen_at == LEASE


def _running(activity: SandboxActivity) -> bool:
    return backend_named("local").probe(activity.backend_sandbox_id)


def test_a_probe_never_revives_a_row_whose_lease_ran_out(alice_api, make_item, clock):
    # Given a sandbox nobody heard from for longer than the lease (the worker was down)
    row = _open(alice_api, make_item())
    clock.advance(seconds=LEASE.total_seconds() + 5)
    # When the worker comes back and probes it
    counts = lifecycle.sandboxes_probe()
    # Then the probe does not bring it back into the count; reclaim shuts it down
    assert counts.refreshed == 0
    assert ledger.live_rows_of_payer("alice").count() == 0
    assert lifecycle.sandboxes_reclaim().closed == 1
    assert not _running(row)


def test_with_no_worker_expired_sandboxes_stop_before_their_capacity_is_given_away(
    write_config, api_client_for, make_item, clock
):
    # Given carol may run 2 sandboxes, and two of hers run background work
    write_config("[sandbox]\nlease = '90s'\n[resources.per_user]\ncount = 2\n")
    carol = api_client_for("carol")
    first, second, third = (make_item(created_by="carol") for _ in range(3))
    for item in (first, second):
        carol.post(item_url(item, "/exec"), {"command": "sleep 300 >/dev/null 2>&1 &"}, format="json")
    rows = list(SandboxActivity.current.filter(owner="carol"))
    # When their leases run out with no worker, and she opens a third
    clock.advance(seconds=95)
    response = carol.post(item_url(third, "/exec"), {"command": "true"}, format="json")
    # Then the third is admitted only because the two expired ones were shut down first
    assert response.status_code == 200
    assert not any(_running(row) for row in rows)
    assert sorted(
        SandboxActivity.objects.filter(pk__in=[r.pk for r in rows]).values_list("close_reason", flat=True)
    ) == [
        "expired",
        "expired",
    ]
    assert ledger.live_rows_of_payer("carol").count() == 1


def test_an_expired_sandbox_that_cannot_be_confirmed_closed_refuses_the_open(
    monkeypatch, write_config, api_client_for, make_item, clock
):
    # Given carol's expired sandbox on a backend that cannot be reached to close it
    write_config("[sandbox]\nlease = '90s'\n[resources.per_user]\ncount = 1\n")
    carol = api_client_for("carol")
    old, new = make_item(created_by="carol"), make_item(created_by="carol")
    _open(carol, old)
    clock.advance(seconds=95)
    backend = backend_named("local")

    def unreachable(sandbox_id: str) -> None:
        raise SandboxUnavailable("the host is down")

    monkeypatch.setattr(backend, "close", unreachable)
    # When she opens another
    response = carol.post(item_url(new, "/exec"), {"command": "true"}, format="json")
    monkeypatch.undo()
    # Then it is refused (503) instead of letting two run against a limit of one
    assert response.status_code == 503
    assert SandboxActivity.objects.filter(item_id=str(new.pk)).count() == 0


def test_reconciliation_closes_sandboxes_the_ledger_does_not_know(alice_api, make_item):
    # Given a sandbox the ledger holds, and one a backend runs without any row (an orphan)
    known = _open(alice_api, make_item())
    backend = backend_named("local")
    orphan = backend.open(workspace_id="999", spec=SandboxSize())
    # When the worker reconciles
    counts = lifecycle.sandboxes_reconcile(older_than=timedelta(0))
    # Then only the orphan is closed
    assert counts.closed == 1
    assert not backend.probe(orphan.id)
    assert _running(known)


def test_reconciliation_leaves_a_sandbox_that_may_still_be_opening(make_item):
    # Given an orphan opened a moment ago (its row may be on the way)
    backend = backend_named("local")
    young = backend.open(workspace_id="998", spec=SandboxSize())
    # When the worker reconciles with the default grace / Then it stays
    assert lifecycle.sandboxes_reconcile().closed == 0
    assert backend.probe(young.id)

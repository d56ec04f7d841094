"""The ledger's hand-written hot statements (the live row of an item, the heartbeat) agree with the ORM."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.forms.models import model_to_dict

from collab import clock as clock_module
from quotas import ledger
from quotas.models import SandboxActivity
from quotas.values import SandboxSize

pytestmark = pytest.mark.django_db
LEASE = timedelta(seconds=90)


def _row(item: str, *, opened_ago: int = 0, expires_in: int = 60, deleted: bool = False, **fields) -> SandboxActivity:
    now = clock_module.now()
    return SandboxActivity.objects.create(
        item_id=item,
        app_slug="notebook",
        owner="alice",
        backend="local",
        opened_at=now - timedelta(seconds=opened_ago),
        lease_expires_at=now + timedelta(seconds=expires_in),
        is_deleted=deleted,
        **fields,
    )


def _stored(row: SandboxActivity) -> dict:
    return model_to_dict(SandboxActivity.objects.get(pk=row.pk))


def test_the_live_row_of_an_item_is_its_newest_live_row_as_the_orm_reads_it(clock):
    # Given item 7's closed, expired and two live rows, and item 8's newer live row
    _row("7", opened_ago=1, deleted=True)
    _row("7", opened_ago=2, expires_in=0)  # exactly at expiry: not live
    _row("7", opened_ago=30, cpu_cores=0.5, memory_bytes=2**30, pids_max=64, charges_cost=True, backend_sandbox_id="a")
    newest = _row("7", opened_ago=20, backend_sandbox_id="b")
    _row("8", opened_ago=0)
    # When the item's live row is read with the hand-written statement
    found = ledger.live_row_of_item(7)
    # Then it is the newest live one, every field as the ORM's query reads it (aware datetimes, bools)
    orm = ledger.live_rows().filter(item_id="7").order_by("-opened_at", "-id").first()
    assert found.pk == orm.pk == newest.pk
    assert model_to_dict(found) == model_to_dict(orm)
    assert found.opened_at.tzinfo is not None
    assert found.is_deleted is False


def test_an_item_without_a_live_row_has_none(clock):
    # Given item 7's closed and expired rows only
    _row("7", deleted=True)
    _row("7", expires_in=-1)
    # When its live row is read
    # Then there is none
    assert ledger.live_row_of_item("7") is None


def test_a_heartbeat_moves_the_lease_and_only_a_use_moves_the_last_use(clock):
    # Given a live row opened a minute ago
    row = _row("7", opened_ago=60)
    before = _stored(row)
    clock.advance(seconds=10)
    # When a probe's heartbeat, then an exec's, arrive 10 s and 20 s later
    seen = ledger.heartbeat(activity_id=row.pk, lease=LEASE)
    after_probe = _stored(row)
    clock.advance(seconds=10)
    used = ledger.heartbeat(activity_id=row.pk, lease=LEASE, used=True)
    after_use = _stored(row)
    # Then both count; the probe moved the evidence and the lease, the exec the last use too
    assert (seen, used) == (True, True)
    first, second = before["opened_at"] + timedelta(seconds=70), before["opened_at"] + timedelta(seconds=80)
    assert (after_probe["last_seen_at"], after_probe["lease_expires_at"]) == (first, first + LEASE)
    assert after_probe["last_used_at"] == before["last_used_at"]
    assert (after_use["last_seen_at"], after_use["lease_expires_at"], after_use["last_used_at"]) == (
        second,
        second + LEASE,
        second,
    )


@pytest.mark.parametrize("state", [{"deleted": True}, {"expires_in": 0}], ids=["closed", "at its expiry"])
def test_a_heartbeat_for_a_row_that_stopped_counting_changes_nothing(clock, state):
    # Given a row closed, or whose lease ends now
    row = _row("7", **state)
    before = _stored(row)
    # When a heartbeat arrives for it
    counted = ledger.heartbeat(activity_id=row.pk, lease=LEASE, used=True)
    # Then it does not count, and the row is as it was
    assert counted is False
    assert _stored(row) == before


@pytest.mark.parametrize(
    "size",
    [SandboxSize(), SandboxSize(cpu_cores=0.5, memory_bytes=2**30, pids_max=64), SandboxSize(cpu_cores=0)],
    ids=["unspecified", "declared", "unlimited cpu"],
)
def test_a_new_sandboxs_row_is_stored_and_returned_as_the_orms_create_stores_it(clock, size):
    # Given the moment a sandbox of `size` is admitted for item 7
    now = clock_module.now()
    # When its row is written with the hand-written INSERT
    written = ledger.activity_open_sent(
        item_id=7, app_slug="notebook", payer="alice", backend="local", size=size, lease=LEASE
    )()
    # Then the row it returns, the row stored, and the row the ORM's create stores agree field by field
    orm = SandboxActivity.objects.create(
        item_id="7",
        app_slug="notebook",
        owner="alice",
        backend="local",
        cpu_cores=size.cpu_cores,
        memory_bytes=size.memory_bytes,
        pids_max=size.pids_max,
        charges_cost=size.declares_cost,
        opened_at=now,
        last_seen_at=now,
        last_used_at=now,
        lease_expires_at=now + LEASE,
    )
    expected = {**_stored(orm), "id": written.pk}
    assert model_to_dict(written) == _stored(written) == expected
    assert written.opened_at.tzinfo is not None
    assert written.size == size

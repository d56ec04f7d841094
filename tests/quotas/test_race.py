"""Race-free admission (docs/ARCHITECTURE.md §8): concurrent opens for one owner never exceed the limit."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection

from collab.edge import status_of
from collab.errors import DomainError
from quotas import ledger
from quotas.models import AdmissionLock
from workspace.items import admission
from workspace.items.admission import before_sandbox_open
from workspace.items.config import get_config

THREADS = 20


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("admitted_before", [False, True], ids=["her first admissions", "after earlier ones"])
def test_twenty_concurrent_opens_with_count_three_admit_exactly_three(
    per_user, make_item, monkeypatch, admitted_before
):
    # Given PostgreSQL, where writers really race, alice allowed three sandboxes, and twenty notebooks of hers
    # (after earlier admissions her lock row exists, and admission takes the pipelined way: here
    # however long it waits for the locks, so that the race is the pipelined way's alone)
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: SQLite runs one writer at a time, so there is no race to lose")
    per_user(count=3)
    if admitted_before:
        AdmissionLock.objects.create(owner="alice")
        monkeypatch.setattr(admission, "_LOCK_WAIT_TOLERATED", timedelta(minutes=10))
    pipelined = _ways_taken(monkeypatch)
    items = [make_item(title=f"Race {n}") for n in range(THREADS)]
    app = get_config().app("notebook")
    start = threading.Barrier(THREADS)
    outcomes: list[str] = []
    lock = threading.Lock()

    def open_one(item) -> None:
        try:
            start.wait()
            # Only the admission step: the check and the new row, without a real backend, so
            # the threads meet in the gate rather than queue on process start-up.
            before_sandbox_open(item=item, app=app, backend="local")
            outcome = "admitted"
        except DomainError as exc:
            outcome = f"{status_of(exc)} {exc.error}"
        finally:
            connection.close()
        with lock:
            outcomes.append(outcome)

    # When twenty threads pass the admission step for them at the same moment
    threads = [threading.Thread(target=open_one, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    # Then exactly three are admitted and seventeen refused, and three are live
    assert sorted(outcomes) == ["507 sandbox_quota_exceeded"] * 17 + ["admitted"] * 3
    assert ledger.live_rows_of_payer("alice").count() == 3
    # And where her lock row was there, the pipelined way decided every one of them
    assert all(pipelined) == admitted_before


def _ways_taken(monkeypatch) -> list[bool]:
    """Whether each pipelined admission from now on decided (True) or left it to the general way."""
    taken: list[bool] = []
    original = admission._admitted_in_two_round_trips

    def watched(**kwargs):
        try:
            decided = original(**kwargs)
        except DomainError:
            taken.append(True)
            raise
        taken.append(decided is not None)
        return decided

    monkeypatch.setattr(admission, "_admitted_in_two_round_trips", watched)
    return taken

"""Race-free admission (docs/ARCHITECTURE.md §8): concurrent opens for one owner never exceed the limit."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from collab.edge import status_of
from collab.errors import DomainError
from quotas import ledger
from quotas.models import AdmissionLock
from tests.fixtures.items import admitted_the_general_way
from workspace.items import admission
from workspace.items.admission import before_sandbox_open
from workspace.items.config import get_config

THREADS = 20


@pytest.mark.postgres(reason="SQLite runs one writer at a time, so there is no race to lose")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("admitted_before", [False, True], ids=["her first admissions", "after earlier ones"])
def test_twenty_concurrent_opens_with_count_three_admit_exactly_three(
    per_user, make_item, monkeypatch, admitted_before
):
    # Given PostgreSQL, where writers really race, alice allowed three sandboxes, and twenty notebooks of hers
    # (after earlier admissions her lock row exists, and admission takes the pipelined way: here
    # however long it waits for the locks, so that the race is the pipelined way's alone)
    per_user(count=3)
    if admitted_before:
        AdmissionLock.objects.create(owner="alice")
        monkeypatch.setattr(admission, "_LOCK_WAIT_TOLERATED", timedelta(minutes=10))
    items = [make_item(title=f"Race {n}") for n in range(THREADS)]
    app = get_config().app("notebook")
    start = threading.Barrier(THREADS)
    outcomes: list[str] = []
    general_ways: list[bool] = []
    lock = threading.Lock()

    def open_one(item) -> None:
        sent = CaptureQueriesContext(connection)
        try:
            start.wait()
            # Only the admission step: the check and the new row, without a real backend, so
            # the threads meet in the gate rather than queue on process start-up.
            with sent:
                before_sandbox_open(item=item, app=app, backend="local")
            outcome = "admitted"
        except DomainError as exc:
            outcome = f"{status_of(exc)} {exc.error}"
        finally:
            connection.close()
        with lock:
            outcomes.append(outcome)
            general_ways.append(admitted_the_general_way(sent.captured_queries))

    # When twenty threads pass the admission step for them at the same moment
    threads = [threading.Thread(target=open_one, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    # Then exactly three are admitted and seventeen refused, and three are live
    assert sorted(outcomes) == ["507 sandbox_quota_exceeded"] * 17 + ["admitted"] * 3
    assert ledger.live_rows_of_payer("alice").count() == 3
    # And where her lock row was there, the pipelined way decided every one of them (none fell
    # back to the general way); where it was not, some did
    assert len(general_ways) == THREADS
    assert (not any(general_ways)) == admitted_before

"""Admission as requests run it, each in transactions of its own (not inside a test's).

On PostgreSQL it then runs in psycopg's pipeline (the pipelined way of `before_sandbox_open`): the
item's lock, its live row and the payer's lock and usage go to the server together, the new row
with the COMMIT. These hold that it decides as the general way does, keeps nothing it refuses,
falls back where what it assumed does not hold, and leaves the connection at rest. On SQLite the
same behaviours hold through the general way.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from collab.errors import QuotaExceeded
from quotas import ledger
from quotas.models import AdmissionLock, SandboxActivity
from quotas.values import SandboxSize
from tests.fixtures.exec_agent import wait_for
from tests.fixtures.items import (
    admitted_the_general_way,
    connection_at_rest,
    kill_server_process_once_it_says,
    sessions_idle_in_a_transaction,
)
from workspace.items import admission
from workspace.items.admission import before_sandbox_open
from workspace.items.config import get_config
from workspace.items.models import Item

pytestmark = pytest.mark.usefixtures("transactional_db")
LEASE = timedelta(seconds=90)


def _running(
    item: Item, payer: str = "alice", size: SandboxSize | None = None, lease: timedelta = LEASE
) -> SandboxActivity:
    return ledger.activity_open_sent(
        item_id=item.pk, app_slug=item.app_slug, payer=payer, backend="local", size=size or SandboxSize(), lease=lease
    )()


def _admit(item: Item) -> admission.Admission:
    return before_sandbox_open(item=item, app=get_config().app(item.app_slug), backend="local")


@pytest.fixture
def alice_admitted_before(make_item) -> None:
    """alice's payer lock row, as her first admission leaves it (the pipelined way needs one)."""
    AdmissionLock.objects.create(owner="alice")


@pytest.mark.usefixtures("alice_admitted_before")
def test_an_admission_under_the_limit_records_the_new_sandbox_at_the_apps_size(per_user, make_item):
    # Given alice may run two sandboxes and runs one
    per_user(count=2)
    _running(make_item())
    item = make_item()
    # When a second is admitted for another item of hers
    admitted = _admit(item)
    # Then it is recorded as opened here, at the notebook's size, as the stored row reads
    assert admitted.opened_here is True
    stored = SandboxActivity.current.get(pk=admitted.activity.pk)
    assert (stored.item_id, stored.owner, stored.size) == (
        str(item.pk),
        "alice",
        get_config().app("notebook").resources.sandbox,
    )
    assert admitted.activity.lease_expires_at == stored.lease_expires_at
    assert connection_at_rest()


@pytest.mark.usefixtures("alice_admitted_before")
@pytest.mark.parametrize(
    ("limits", "dimension", "used"),
    [({"count": 1}, "sandboxes", 1), ({"cpu": 1.5}, "cpu", 1.0), ({"memory": "768M"}, "memory", 512 * 2**20)],
    ids=["sandboxes", "cpu", "memory"],
)
def test_an_admission_over_a_limit_is_refused_and_keeps_nothing(per_user, make_item, limits, dimension, used):
    # Given alice may run one notebook's worth of a dimension, and one runs
    per_user(**limits)
    _running(make_item(), size=get_config().app("notebook").resources.sandbox)
    refused = make_item()
    # When another item of hers asks for one / Then it is refused on that dimension's limit
    with pytest.raises(QuotaExceeded) as refusal:
        _admit(refused)
    assert (refusal.value.error, refusal.value.extra["dimension"], refusal.value.extra["used"]) == (
        "sandbox_quota_exceeded",
        dimension,
        used,
    )
    # And nothing is recorded for it, and no transaction is left open
    assert not SandboxActivity.objects.filter(item_id=str(refused.pk)).exists()
    assert connection_at_rest()


@pytest.mark.usefixtures("alice_admitted_before")
def test_an_item_with_a_live_sandbox_is_handed_it_without_counting_or_writing(per_user, make_item):
    # Given alice may run one sandbox, and it runs in the item
    per_user(count=1)
    item = make_item()
    live = _running(item)
    # When the item asks for a sandbox again
    admitted = _admit(item)
    # Then it is handed the live one, not refused, and no row is added
    assert (admitted.opened_here, admitted.activity.pk) == (False, live.pk)
    assert SandboxActivity.objects.count() == 1
    assert connection_at_rest()


def test_the_payers_first_admission_makes_their_lock_row_and_is_admitted(per_user, make_item):
    # Given alice may run one sandbox, and has never been admitted (no lock row of hers)
    per_user(count=1)
    item = make_item()
    # When her item asks for one
    admitted = _admit(item)
    # Then it is admitted, and her lock row exists for the next admission to queue on
    assert admitted.opened_here is True
    assert AdmissionLock.objects.filter(owner="alice").exists() == connection.features.has_select_for_update
    assert connection_at_rest()


@pytest.mark.usefixtures("alice_admitted_before")
def test_a_payer_changed_since_the_item_was_loaded_is_the_one_who_pays(per_user, make_item):
    # Given everyone may run one sandbox, bob runs one, and an item alice pays for as the caller loaded it
    per_user(count=1)
    AdmissionLock.objects.create(owner="bob")
    _running(make_item(created_by="bob"), payer="bob")
    item = make_item()
    # When bob became its payer before the admission locked it
    Item.objects.filter(pk=item.pk).update(owner="bob")
    # Then the admission counts bob's sandbox and refuses on his limit, naming him
    with pytest.raises(QuotaExceeded) as refusal:
        _admit(item)
    assert refusal.value.extra["owner"] == "bob"
    assert not SandboxActivity.objects.filter(item_id=str(item.pk)).exists()
    assert connection_at_rest()


@pytest.mark.postgres(reason="the pipelined way is PostgreSQL's; SQLite has no round trips to save")
@pytest.mark.usefixtures("alice_admitted_before")
def test_on_postgresql_an_admission_of_a_payer_with_a_lock_row_takes_the_pipelined_way(per_user, make_item):
    # Given PostgreSQL, alice with a limit and her lock row
    per_user(count=2)
    item = make_item()
    # When her item is admitted
    with CaptureQueriesContext(connection) as sent:
        admitted = _admit(item)
    # Then the pipelined way decided it (it did not fall back to the general way), and the row is stored
    assert not admitted_the_general_way(sent.captured_queries)
    assert admitted.opened_here
    assert SandboxActivity.current.filter(pk=admitted.activity.pk, item_id=str(item.pk)).exists()


@pytest.mark.usefixtures("alice_admitted_before")
def test_an_admission_whose_insert_fails_keeps_nothing_and_the_next_is_admitted(per_user, make_item, monkeypatch):
    # Given alice may run two sandboxes, and the new row's INSERT fails on the server
    per_user(count=2)
    item = make_item()
    original = ledger.activity_open_sent

    def failing(**kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM no_such_table")
        return original(**kwargs)

    monkeypatch.setattr(ledger, "activity_open_sent", failing)
    # When the item asks for a sandbox / Then the failure reaches the caller as Django's error
    with pytest.raises(DatabaseError):
        _admit(item)
    # And nothing is kept, the connection is at rest, and the locks are gone: the next admission goes through
    assert not SandboxActivity.objects.exists()
    assert connection_at_rest()
    monkeypatch.undo()
    assert _admit(item).opened_here is True


def _waiting_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.postgres(reason="only PostgreSQL's admission is sent before its locks are held")
@pytest.mark.usefixtures("alice_admitted_before")
@pytest.mark.parametrize("held", ["the item's row", "alice's admission lock"])
def test_a_lease_that_runs_out_while_the_admission_waits_for_a_lock_is_not_counted(per_user, make_item, clock, held):
    # Given PostgreSQL, alice allowed one sandbox, and the item's sandbox (or her other one) with a
    # lease of a second; another transaction holds the lock the admission takes first
    per_user(count=1)
    item = make_item()
    _running(item if held == "the item's row" else make_item(), lease=timedelta(seconds=1))
    outcome: dict[str, object] = {}

    def admit() -> None:
        try:
            outcome["admitted"] = _admit(item)
        except Exception as exc:  # the assertion below names it
            outcome["failed"] = exc
        finally:
            connection.close()

    holder = psycopg.connect(**_dsn())
    try:
        if held == "the item's row":
            holder.execute(f"SELECT 1 FROM {Item._meta.db_table} WHERE id = %s FOR UPDATE", [item.pk])
        else:
            holder.execute(f"SELECT 1 FROM {AdmissionLock._meta.db_table} WHERE owner = 'alice' FOR UPDATE")
        admission_thread = threading.Thread(target=admit)
        admission_thread.start()
        # When the admission waits for that lock while the lease runs out, and then gets it
        wait_for(_waiting_for_a_lock)
        clock.advance(seconds=5)
    finally:
        holder.close()
    admission_thread.join(timeout=30)
    # Then the expired sandbox does not count: a new one is admitted here, as the general way would
    assert "failed" not in outcome, outcome
    assert outcome["admitted"].opened_here is True


def _dsn() -> dict[str, object]:
    settings = connection.settings_dict
    return {"host": settings["HOST"], "port": settings["PORT"], "user": settings["USER"], "dbname": settings["NAME"]}


def _exec(api, item: Item, body: object):
    return api.post(f"/a/{item.app_slug}/items/{item.pk}/exec", body, format="json")


@pytest.mark.usefixtures("alice_admitted_before")
def test_a_strangers_command_in_alices_item_is_404_and_admits_nothing(per_user, bob_api, make_item):
    # Given alice's item without a sandbox, and limits that bind
    per_user(count=1)
    item = make_item()
    # When bob runs a command in it, as a request runs it
    response = _exec(bob_api, item, {"command": "true"})
    # Then it is 404, no sandbox row is written for anyone, and bob gets no lock row
    assert (response.status_code, response.json()["error"]) == (404, "not_found")
    assert not SandboxActivity.objects.exists()
    assert not AdmissionLock.objects.filter(owner="bob").exists()
    assert connection_at_rest()


@pytest.mark.usefixtures("alice_admitted_before")
@pytest.mark.parametrize(
    "body",
    [{"command": "x" * 2_000_000}, {"command": ["true"], "timeout": [[[[[[[[[[1]]]]]]]]]]}, [1] * 100_000],
    ids=["a 2 MB command", "a deeply nested timeout", "a list of 10^5 items"],
)
def test_a_command_body_that_is_refused_opens_no_sandbox(per_user, alice_api, make_item, body):
    # Given alice's item without a sandbox
    per_user(count=1)
    item = make_item()
    # When she sends a body the exec refuses
    response = _exec(alice_api, item, body)
    # Then it is a 4xx with an error code, and nothing was admitted
    assert 400 <= response.status_code < 500
    assert response.json()["error"]
    assert not SandboxActivity.objects.exists()
    assert connection_at_rest()


PAUSE_BETWEEN_THE_ROUND_TRIPS = """
import sys, time
import django
django.setup()
from quotas import services
from workspace.items.config import get_config
from workspace.items.models import Item
from workspace.items import admission

def pause(**kwargs):
    print("between", flush=True)
    time.sleep(60)

services.sandbox_refusal = pause
item = Item.objects.get(pk=int(sys.argv[1]))
admission.before_sandbox_open(item=item, app=get_config().app("notebook"), backend="local")
"""


@pytest.mark.postgres(reason="the pipelined admission is PostgreSQL's")
@pytest.mark.usefixtures("alice_admitted_before")
def test_a_server_killed_between_the_admissions_round_trips_keeps_nothing_and_holds_no_lock(
    per_user, make_item, tmp_path
):
    # Given PostgreSQL, alice with a limit, and a server process whose admission holds her
    # item's and her own lock (its first round trip answered, the second not sent)
    config = per_user(count=1)
    item = make_item()
    # When it is killed with SIGKILL there
    kill_server_process_once_it_says(
        "between", PAUSE_BETWEEN_THE_ROUND_TRIPS, str(item.pk), var_dir=tmp_path, WORKSPACE_CONFIG=str(config)
    )
    # Then nothing of it was kept, its session is gone, and the item's next admission is not held up
    wait_for(lambda: not sessions_idle_in_a_transaction())
    assert not SandboxActivity.objects.exists()
    assert _admit(item).opened_here is True

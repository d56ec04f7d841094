"""An exec's bookkeeping transactions as requests run them (each in transactions of its own, not
inside a test's): on PostgreSQL begun and ended by statements sent together with the rest, so these
hold that they stay one transaction, roll back whole, and leave the connection as it was."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, OperationalError, ProgrammingError, connection
from django.test.utils import CaptureQueriesContext

from collab import clock, slots
from collab.actor import Actor
from collab.models import CommandSlot
from collab.rows import answer_later, bookkeeping
from quotas import ledger
from quotas.models import SandboxActivity
from quotas.values import SandboxSize
from tests.fixtures.exec_agent import wait_for
from tests.fixtures.items import (
    connection_at_rest,
    item_url,
    kill_server_process_once_it_says,
    sessions_idle_in_a_transaction,
)
from workspace.items import lifecycle, running, services
from workspace.items.config import get_config
from workspace.items.models import RunningExec
from workspace.sandboxes.base import MAX_COMMAND_BYTES

pytestmark = pytest.mark.usefixtures("transactional_db")
LEASE = timedelta(seconds=90)


def _exec(api, item, command="true"):
    return api.post(item_url(item, "/exec"), {"command": command}, format="json")


def _live_row(item) -> SandboxActivity:
    return ledger.activity_open_sent(
        item_id=item.pk, app_slug=item.app_slug, payer="alice", backend="local", size=SandboxSize(), lease=LEASE
    )()


@pytest.fixture
def alice_live_item(make_item, settings):
    """alice's notebook item with a live sandbox, and two command slots for her."""
    settings.WORKSPACE_EXEC_CONCURRENCY_PER_USER = 2
    item, app = make_item(), get_config().app("notebook")
    services.item_exec(item=item, app=app, command="true", actor=Actor("alice"))
    return item, app


def _nothing_kept() -> bool:
    """No slot, no command record, no transaction left open."""
    return not CommandSlot.objects.exists() and not RunningExec.objects.exists() and connection_at_rest()


def _calls(monkeypatch, owner, name: str) -> list[dict]:
    """The keyword arguments of each call of `owner.name` from now on (it still runs)."""
    calls: list[dict] = []
    original = getattr(owner, name)

    def watched(**kwargs):
        calls.append(kwargs)
        return original(**kwargs)

    monkeypatch.setattr(owner, name, watched)
    return calls


@pytest.mark.postgres(reason="its transaction ids say which writes went together")
def test_on_postgresql_a_live_exec_takes_its_slot_beats_and_records_its_command_in_one_transaction(
    alice_api, alice_live_item, monkeypatch
):
    # Given PostgreSQL, alice's item with a live sandbox, and the transactions of the exec's first writes watched
    item, _app = alice_live_item
    seen: dict[str, int] = {}

    def watched(name, original):
        def run(**kwargs):
            with connection.cursor() as cursor:
                cursor.execute("SELECT txid_current()")
                seen.setdefault(name, cursor.fetchone()[0])  # the first call: the ending beats again
            return original(**kwargs)

        return run

    monkeypatch.setattr(ledger, "heartbeat_sent", watched("heartbeat", ledger.heartbeat_sent))
    monkeypatch.setattr(slots, "slot_claim_first", watched("slot", slots.slot_claim_first))
    monkeypatch.setattr(running, "exec_record", watched("record", running.exec_record))
    # When she runs a command there
    assert _exec(alice_api, item).status_code == 200
    # Then the heartbeat, her slot and the command's record were one transaction, and it ended
    assert seen["heartbeat"] == seen["slot"] == seen["record"]
    assert connection_at_rest()


@pytest.mark.postgres(reason="on SQLite a statement is a call, not a round trip")
def test_on_postgresql_a_live_exec_reaches_the_database_three_times(alice_api, alice_live_item):
    # Given PostgreSQL and alice's item with a live sandbox, her commands' statements prepared by one before
    item, _app = alice_live_item
    assert _exec(alice_api, item).status_code == 200
    # When she runs a command there
    with CaptureQueriesContext(connection) as sent:
        assert _exec(alice_api, item).status_code == 200
    # Then it reached the database three times: the item with its live row, the start (her slot,
    # the heartbeat, the record, the COMMIT) and the end (the record gone, the heartbeat, the
    # slot given back, the COMMIT)
    assert len(sent.captured_queries) == 3
    transactions = [query["sql"] for query in sent.captured_queries[1:]]
    assert [(sql.split(";")[0], sql.rsplit(";", 1)[-1].strip()) for sql in transactions] == [("BEGIN", "COMMIT")] * 2


def test_a_command_whose_text_is_sql_runs_as_typed_and_is_recorded_as_typed(alice_api, alice_live_item):
    # Given alice's item with a live sandbox, and a command whose text would end a statement string
    item, _app = alice_live_item
    hostile = 'echo "x\'); DELETE FROM items_runningexec; COMMIT; -- %s %% \\\\"'
    # When she runs it, and its record is written inside a bookkeeping transaction as a running command's is
    response = _exec(alice_api, item, hostile)
    with bookkeeping(unread=True) as book, book.unread_until_commit():
        running.exec_record(
            exec_id="c" * 32,
            item=item,
            requested_by="alice",
            command=hostile,
            activity=SandboxActivity.current.get(item_id=str(item.pk)),
            timeout=30,
        )
    # Then the shell saw the text as typed, the record holds it as typed, and nothing else ran
    assert response.status_code == 200
    assert response.json()["stdout"] == "x'); DELETE FROM items_runningexec; COMMIT; -- %s %% \\\n"
    assert RunningExec.objects.get(pk="c" * 32).command == hostile
    assert not CommandSlot.objects.exists()
    assert connection_at_rest()


def test_a_command_of_the_longest_size_runs_and_one_byte_more_is_refused_with_nothing_kept(alice_api, alice_live_item):
    # Given alice's item with a live sandbox and her row as it stands
    item, _app = alice_live_item
    before = SandboxActivity.current.get(item_id=str(item.pk)).lease_expires_at
    longest = ": " + "'\"%;" * ((MAX_COMMAND_BYTES - 2) // 4)
    longest += " " * (MAX_COMMAND_BYTES - len(longest))
    # When she runs a command of exactly the most bytes allowed, then one a byte longer
    fits = _exec(alice_api, item, longest)
    refused = _exec(alice_api, item, longest + " ")
    # Then the first runs, the second is 400 `invalid_command`, and nothing of it is kept
    assert fits.status_code == 200
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_command"
    assert SandboxActivity.current.get(item_id=str(item.pk)).lease_expires_at > before
    assert not RunningExec.objects.exists()
    assert not CommandSlot.objects.exists()
    assert connection_at_rest()


def test_a_command_refused_on_a_live_sandbox_leaves_the_row_and_the_connection_as_they_were(alice_api, alice_live_item):
    # Given alice's item with a live sandbox, and her two commands running elsewhere (the most she may)
    item, _app = alice_live_item
    before = SandboxActivity.current.get(item_id=str(item.pk))
    held = [slots.slot_take(user_id="alice", seconds=30) for _ in range(2)]
    # When she starts a third there
    response = _exec(alice_api, item)
    # Then it is 429, the heartbeat sent before the refusal was rolled back, nothing recorded,
    # and no transaction is left open on the connection
    assert response.status_code == 429
    after = SandboxActivity.current.get(item_id=str(item.pk))
    assert (after.last_used_at, after.lease_expires_at) == (before.last_used_at, before.lease_expires_at)
    assert not RunningExec.objects.exists()
    assert sorted(CommandSlot.objects.values_list("pk", flat=True)) == sorted(slot.pk for slot in held)
    assert connection_at_rest()
    # And once one of hers ends, her next command runs and is kept
    slots.slot_release(held[0])
    assert _exec(alice_api, item, "true").status_code == 200


def test_a_statement_that_fails_in_the_bookkeeping_rolls_it_all_back_and_the_connection_works_on(make_item):
    # Given alice's item with a live row and a command recorded
    item = make_item()
    row = _live_row(item)
    running.exec_record(exec_id="a" * 32, item=item, requested_by="alice", command="true", activity=row, timeout=30)
    seen_before = SandboxActivity.objects.get(pk=row.pk).last_seen_at
    beaten: list[bool] = []

    def beat_then_record_again() -> None:
        with bookkeeping() as book:
            beaten.append(ledger.heartbeat_sent(activity_id=row.pk, lease=LEASE * 2, used=True)())
            with book.unread_until_commit():
                running.exec_record(
                    exec_id="a" * 32, item=item, requested_by="alice", command="true", activity=row, timeout=30
                )

    # When a bookkeeping transaction beats and then records the same command again (a duplicate key)
    with pytest.raises(IntegrityError):
        beat_then_record_again()
    assert beaten == [True]
    # Then the heartbeat is undone, the connection is at rest, and the next write is kept
    assert SandboxActivity.objects.get(pk=row.pk).last_seen_at == seen_before
    assert connection_at_rest()
    running.exec_forget("a" * 32)
    assert not RunningExec.objects.exists()


def test_a_bookkeeping_inside_another_is_part_of_it(make_item):
    # Given alice's item with a live row
    item = make_item()
    row = _live_row(item)

    def inner_then_fail() -> None:
        with bookkeeping():
            with bookkeeping(unread=True) as inner, inner.unread_until_commit():
                running.exec_record(
                    exec_id="b" * 32, item=item, requested_by="alice", command="true", activity=row, timeout=30
                )
            raise RuntimeError("after the inner block")

    # When an outer bookkeeping runs an inner one that records a command (its COMMIT unread), then fails
    with pytest.raises(RuntimeError, match="after the inner block"):
        inner_then_fail()
    # Then the inner record went with the outer: nothing was committed, and the connection is at rest
    assert not RunningExec.objects.exists()
    assert connection_at_rest()


def test_a_bookkeeping_that_raises_before_any_statement_leaves_nothing_open(make_item):
    # Given alice's item with a live row
    item = make_item()
    row = _live_row(item)

    def beat_then_refuse() -> None:
        with bookkeeping():
            ledger.heartbeat_sent(activity_id=row.pk, lease=LEASE * 2, used=True)
            raise RuntimeError("refused")

    # When a bookkeeping block raises right after its heartbeat was sent (not yet read)
    with pytest.raises(RuntimeError, match="refused"):
        beat_then_refuse()
    # Then the row is as opened and the connection at rest
    stored = SandboxActivity.objects.get(pk=row.pk)
    assert stored.lease_expires_at == row.lease_expires_at
    assert connection_at_rest()


@pytest.mark.postgres(reason="on SQLite a bookkeeping block is Django's atomic, and one inside it a savepoint")
def test_on_postgresql_an_atomic_block_inside_a_bookkeeping_is_refused_with_nothing_written(make_item):
    # Given PostgreSQL (the bookkeeping's own transaction is not Django's `atomic`) and a live row
    item = make_item()
    row = _live_row(item)

    def beat_then_delete_with_the_orm() -> None:
        with bookkeeping():
            ledger.heartbeat_sent(activity_id=row.pk, lease=LEASE * 2, used=True)()
            RunningExec.objects.filter(item=item).delete()  # the ORM's delete opens an atomic

    # When code in a bookkeeping block opens an atomic of its own
    # Then it fails loudly (psycopg refuses to leave autocommit inside a transaction), the
    # heartbeat before it is undone, and the connection is at rest
    with pytest.raises(Exception, match="autocommit"):
        beat_then_delete_with_the_orm()
    assert SandboxActivity.objects.get(pk=row.pk).lease_expires_at == row.lease_expires_at
    assert connection_at_rest()


HOLD_INSIDE_A_BOOKKEEPING = """
import sys, time
import django
django.setup()
from datetime import timedelta
from collab import slots
from collab.rows import bookkeeping
from quotas import ledger
with bookkeeping():
    assert ledger.heartbeat_sent(activity_id=int(sys.argv[1]), lease=timedelta(hours=1), used=True)()
    assert slots.slot_take(user_id="alice", seconds=30) is not None
    print("inside", flush=True)
    time.sleep(60)
"""


@pytest.mark.postgres(reason="the bookkeeping's own transaction is PostgreSQL's; on SQLite it is Django's atomic")
def test_on_postgresql_a_server_killed_inside_a_bookkeeping_leaves_nothing_of_it(make_item, tmp_path):
    # Given PostgreSQL (the bookkeeping's own transaction) and alice's item with a live row
    item = make_item()
    row = _live_row(item)
    # When a server process has beaten and taken alice's slot inside a bookkeeping block, and is
    # killed with SIGKILL before the block ends
    kill_server_process_once_it_says("inside", HOLD_INSIDE_A_BOOKKEEPING, str(row.pk), var_dir=tmp_path)
    # Then nothing of the block was kept: the lease as opened, no slot taken, and no session of it left
    wait_for(lambda: not sessions_idle_in_a_transaction())
    assert SandboxActivity.objects.get(pk=row.pk).lease_expires_at == row.lease_expires_at
    assert not CommandSlot.objects.exists()


def test_a_strangers_command_on_a_live_sandbox_is_404_and_touches_none_of_its_bookkeeping(
    alice_api, bob_api, make_item
):
    # Given alice's item with a live sandbox
    item = make_item()
    assert _exec(alice_api, item).status_code == 200
    before = SandboxActivity.current.get(item_id=str(item.pk))
    # When bob, who has no right to it, runs a command there
    response = _exec(bob_api, item, "touch bob-was-here")
    # Then it is 404, and the sandbox's row, the slots and the records are as they were
    assert response.status_code == 404
    after = SandboxActivity.current.get(item_id=str(item.pk))
    assert (after.last_used_at, after.lease_expires_at) == (before.last_used_at, before.lease_expires_at)
    assert not CommandSlot.objects.exists()
    assert not RunningExec.objects.exists()
    assert not (lifecycle.workspace_dir(item.pk) / "bob-was-here").exists()
    assert connection_at_rest()


def test_a_command_started_while_another_of_hers_runs_takes_her_next_slot_and_keeps_nothing_of_the_first_try(
    alice_api, alice_live_item, monkeypatch
):
    # Given alice's item with a live sandbox, and one command of hers running elsewhere (her first slot)
    item, _app = alice_live_item
    held = slots.slot_take(user_id="alice", seconds=30)
    claims = _calls(monkeypatch, slots, "slot_claim_first")
    # When she starts another there
    response = _exec(alice_api, item, "echo ran")
    # Then it tried her first slot, found it held, and ran once in her second
    assert response.status_code == 200
    assert response.json()["stdout"] == "ran\n"
    assert len(claims) == 1
    # And nothing of the first try is left: her held slot alone, no record, no transaction open
    assert list(CommandSlot.objects.values_list("pk", flat=True)) == [held.pk]
    assert not RunningExec.objects.exists()
    assert connection_at_rest()


def test_a_command_on_a_live_sandbox_with_nothing_else_of_hers_running_never_reads_her_slots(
    alice_api, alice_live_item, monkeypatch
):
    # Given alice's item with a live sandbox, and nothing else of hers running
    item, _app = alice_live_item
    looked = _calls(monkeypatch, slots, "slot_take")
    # When she runs a command there
    response = _exec(alice_api, item, "echo ran")
    # Then it ran in her first slot, claimed without looking at the others, and gave it back
    assert response.status_code == 200
    assert response.json()["stdout"] == "ran\n"
    assert looked == []
    assert not CommandSlot.objects.exists()
    assert connection_at_rest()


def test_a_failure_after_the_first_slot_was_claimed_and_kept_gives_it_back_and_runs_nothing_again(
    alice_live_item, monkeypatch
):
    # Given alice's item whose live row an exec read a moment before its lease ran out, so the
    # exec's first start keeps its claimed slot and moves on to a new sandbox, whose start fails
    item, app = alice_live_item
    read_live = ledger.live_row_of_item(item.pk)
    SandboxActivity.objects.filter(pk=read_live.pk).update(lease_expires_at=clock.now() - timedelta(seconds=1))
    records = []
    record = running.exec_record

    def second_start_fails(**kwargs):
        records.append(kwargs["activity"].pk)
        if len(records) == 2:
            raise IntegrityError("the new sandbox's record broke a key")
        record(**kwargs)

    monkeypatch.setattr(running, "exec_record", second_start_fails)
    # When she runs a command there
    with pytest.raises(IntegrityError):
        services.item_exec(
            item=item, app=app, command="true", actor=Actor("alice"), live_row=ledger.LiveRowRead(read_live)
        )
    # Then the failure is hers to see, the start was not tried again, and her slot is free
    assert len(records) == 2
    assert records[0] == read_live.pk != records[1]
    assert _nothing_kept()


def test_a_start_that_fails_before_the_slot_had_an_answer_reports_that_failure_and_holds_no_slot(
    alice_live_item, monkeypatch
):
    # Given alice's item with a live sandbox; the claim of her first slot gets no answer (as in a
    # PostgreSQL pipeline that failed before it), and the start then loses its connection
    item, app = alice_live_item

    def unanswered(statement, params, *, connection):
        answer_later(statement, params, connection=connection)

        def no_result():
            raise ProgrammingError("no result available")

        return no_result

    def connection_lost(**kwargs):
        raise OperationalError("the server closed the connection unexpectedly")

    monkeypatch.setattr(slots, "answer_later", unanswered)
    monkeypatch.setattr(running, "exec_record", connection_lost)
    # When she runs a command there
    with pytest.raises(OperationalError) as failed:
        services.item_exec(item=item, app=app, command="true", actor=Actor("alice"))
    # Then she is told of that failure (not of a slot that could not be read), nothing is kept,
    # and the connection works on
    assert "closed the connection" in str(failed.value)
    assert _nothing_kept()

"""Exec over the API: opening, reusing and closing the item's sandbox, and refusing bad input."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, IntegrityError, connection
from django.test.utils import CaptureQueriesContext

from collab import clock
from collab.models import CommandSlot
from collab.rows import bookkeeping
from collab.slots import slot_release
from quotas import ledger
from quotas.models import SandboxActivity
from tests.fixtures.items import item_url
from workspace.items import admission, lifecycle
from workspace.items.models import RunningExec

pytestmark = pytest.mark.django_db
MIB = 1024**2


def _exec(api, item, command, **extra):
    return api.post(item_url(item, "/exec"), {"command": command, **extra}, format="json")


def test_exec_opens_a_sandbox_and_runs_in_the_workspace(alice_api, make_item):
    # Given alice's notebook with hello.txt in its workspace
    item = make_item()
    alice_api.put(item_url(item, "/files/hello.txt"), b"hi", content_type="application/octet-stream")
    # When she runs ls in it, with no sandbox open yet
    body = _exec(alice_api, item, "ls").json()
    # Then a local sandbox is opened and the command lists the workspace
    assert (body["exit_code"], body["stdout"], body["sandbox_opened"]) == (0, "hello.txt\n", True)
    assert body["sandbox_id"].startswith("loc-")


def test_a_second_exec_reuses_the_live_sandbox(alice_api, make_item):
    # Given alice's notebook whose first command opened a sandbox
    item = make_item()
    first = _exec(alice_api, item, "true").json()
    # When she runs a second command
    second = _exec(alice_api, item, ["echo", "again"]).json()
    # Then it runs in the same sandbox, none is opened and the ledger holds one row
    assert second["sandbox_id"] == first["sandbox_id"]
    assert second["sandbox_opened"] is False
    assert SandboxActivity.objects.count() == 1


def test_exec_reports_exit_code_and_stderr(alice_api, make_item):
    # Given alice's notebook
    # When she runs a command that writes to stderr and exits 3
    body = _exec(alice_api, make_item(), "echo oops >&2; exit 3").json()
    # Then the reply carries both
    assert (body["exit_code"], body["stderr"]) == (3, "oops\n")


def test_exec_past_its_timeout_is_killed_and_reported(alice_api, make_item):
    # Given alice's notebook
    # When she runs a command that sleeps past its 0.3 s timeout
    body = _exec(alice_api, make_item(), "sleep 20", timeout=0.3).json()
    # Then the reply says it timed out
    assert body["timed_out"] is True


def test_the_ledger_row_carries_owner_and_resolved_size(alice_api, make_item):
    # Given an item alice created and bob pays for
    item = make_item(owner="bob")
    # When she runs a command in it
    _exec(alice_api, item, "true")
    # Then the live ledger row charges bob with the notebook app's cpu and memory
    row = ledger.live_row_of_item(item.pk)
    assert (row.owner, row.app_slug, row.cpu_cores, row.memory_bytes) == ("bob", "notebook", 1.0, 512 * MIB)


def test_an_app_that_declares_nothing_charges_unspecified_not_zero(alice_api, make_item, write_config):
    # Given alice's rca item, whose app declares no cpu or memory, in a deployment without a default size
    write_config("[sandbox]\n")
    item = make_item(app_slug="rca")
    # When she runs a command in it
    _exec(alice_api, item, "true")
    # Then the live ledger row charges them as unspecified, not as zero
    row = ledger.live_row_of_item(item.pk)
    assert (row.cpu_cores, row.memory_bytes) == (None, None)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"command": ""},
        {"command": "   "},
        {"command": []},
        {"command": [""]},
        {"command": 42},
        {"command": ["ls", 3]},
        {"command": "x" * 20000},
        {"command": ["echo"] * 1000},
        {"command": "ls", "timeout": 0},
        {"command": "ls", "timeout": 100000},
        {"command": "ls", "timeout": "soon"},
    ],
)
def test_bad_exec_input_is_400_and_opens_nothing(alice_api, make_item, body):
    # Given alice's notebook
    item = make_item()
    # When she sends a missing, empty or ill-typed command, one too long, or a timeout out of range
    response = alice_api.post(item_url(item, "/exec"), body, format="json")
    # Then it is 400 with an error and a detail, and no sandbox is opened
    assert response.status_code == 400
    assert set(response.json()) >= {"error", "detail"}
    assert not SandboxActivity.objects.exists()


def test_exec_on_someone_elses_item_is_404_and_opens_nothing(bob_api, make_item):
    # Given alice's notebook
    # When bob runs a command in it
    response = _exec(bob_api, make_item(), "ls")
    # Then it is 404 and no sandbox is opened
    assert response.status_code == 404
    assert not SandboxActivity.objects.exists()


def test_exec_on_an_unknown_item_or_app_is_404(alice_api):
    # Given alice, and neither an item 424242 nor an app nope
    # When she runs a command in an item that does not exist / Then it is 404
    assert alice_api.post("/a/notebook/items/424242/exec", {"command": "ls"}, format="json").status_code == 404
    # When she runs one under an app that does not exist / Then it is 404 too
    assert alice_api.post("/a/nope/items/1/exec", {"command": "ls"}, format="json").status_code == 404


def test_closing_the_sandbox_soft_deletes_the_row_and_the_next_exec_opens_a_new_one(alice_api, make_item):
    # Given alice's notebook with a sandbox opened by a command
    item = make_item()
    first = _exec(alice_api, item, "true").json()["sandbox_id"]
    # When she closes the sandbox / Then it is 204
    assert alice_api.delete(item_url(item, "/sandbox")).status_code == 204
    # Then its ledger row is soft-deleted with the reason closed
    closed = SandboxActivity.objects.get()
    assert (closed.is_deleted, closed.close_reason) == (True, "closed")
    # When she runs another command
    second = _exec(alice_api, item, "true").json()
    # Then a new sandbox is opened for it
    assert second["sandbox_id"] != first
    assert second["sandbox_opened"] is True


def test_sandbox_state_is_served_and_404_when_none_is_live(alice_api, make_item):
    # Given alice's notebook with no sandbox
    item = make_item()
    # When its sandbox is asked for / Then the answer is no_live_sandbox
    assert alice_api.get(item_url(item, "/sandbox")).json()["error"] == "no_live_sandbox"
    # When a command opens one
    sandbox_id = _exec(alice_api, item, "true").json()["sandbox_id"]
    # Then the sandbox and the item both serve its id
    assert alice_api.get(item_url(item, "/sandbox")).json()["sandbox_id"] == sandbox_id
    assert alice_api.get(item_url(item)).json()["sandbox"]["sandbox_id"] == sandbox_id


def test_admission_is_the_one_place_a_new_sandbox_is_recorded(alice_api, make_item, monkeypatch):
    # Given the admission hook watched for each item it is asked about, and alice's notebook
    calls = []
    original = admission.before_sandbox_open

    def spy(**kwargs):
        calls.append(kwargs["item"].pk)
        return original(**kwargs)

    monkeypatch.setattr("workspace.items.lifecycle.before_sandbox_open", spy)
    item = make_item()
    # When she runs two commands in it
    _exec(alice_api, item, "true")
    _exec(alice_api, item, "true")
    # Then admission ran once, for the sandbox the first one opened
    assert calls == [item.pk]


def test_exec_on_a_live_sandbox_costs_a_bounded_number_of_queries(alice_api, make_item, django_assert_max_num_queries):
    # Given alice's notebook with a live sandbox
    item = make_item()
    _exec(alice_api, item, "true")
    # When she runs another command / Then it costs a bounded number of queries: the item, the
    # sandbox (read), then two writes: her command slot (slot 0 inserted without a read, skipped
    # if taken) + heartbeat + the record that lets it be stopped, then record gone + heartbeat +
    # slot freed (two commits in production; here the first is a savepoint pair, as tests run in
    # a transaction)
    with django_assert_max_num_queries(10):
        assert _exec(alice_api, item, "true").status_code == 200


@pytest.mark.postgres(reason="synchronous_commit is its setting")
def test_on_postgresql_only_an_execs_bookkeeping_commits_without_waiting_for_the_disk(
    transactional_db, alice_api, make_item
):
    # Given alice's notebook with a live sandbox, on PostgreSQL, each request in its own transactions
    item = make_item()
    _exec(alice_api, item, "true")
    # When she runs a command and then writes a file
    with CaptureQueriesContext(connection) as executed:
        assert _exec(alice_api, item, "true").status_code == 200
    with CaptureQueriesContext(connection) as written:
        put = alice_api.put(item_url(item, "/files/a.txt"), b"x", content_type="application/octet-stream")
        assert put.status_code in (200, 201)
    # Then the command's two bookkeeping transactions (slot, heartbeat, record), each sent as one
    # batch of statements, skip the flush; her file's don't
    relaxed = "SET LOCAL synchronous_commit TO OFF"
    assert sum(relaxed in query["sql"] for query in executed.captured_queries) == 2
    assert not any(relaxed in query["sql"] for query in written.captured_queries)


def test_an_exec_in_transactions_of_its_own_frees_its_slot_and_record_and_refreshes_the_sandbox(
    transactional_db, alice_api, make_item
):
    # Given alice's notebook with a live sandbox, each request in transactions of its own (on
    # PostgreSQL the end of an exec goes to the server in one round trip)
    item = make_item()
    _exec(alice_api, item, "true")
    before = SandboxActivity.current.get(item_id=item.pk)
    # When she runs a command
    assert _exec(alice_api, item, "echo hi").json()["stdout"] == "hi\n"
    # Then her slot is free again, the command's record is gone and the sandbox was used just now
    after = SandboxActivity.current.get(item_id=item.pk)
    assert not CommandSlot.objects.filter(user_id="alice").exists()
    assert not RunningExec.objects.exists()
    assert after.last_used_at > before.last_used_at
    assert after.lease_expires_at > before.lease_expires_at


def test_a_statement_failing_in_an_execs_bookkeeping_undoes_the_statements_before_it(transactional_db):
    # Given a slot alice holds
    held = CommandSlot.objects.create(user_id="alice", slot=0, expires_at=clock.now())

    # When a bookkeeping transaction whose results nobody reads frees it, then writes a row that
    # breaks a constraint
    def free_then_break() -> None:
        with bookkeeping(savepoint=False, unread=True):
            slot_release(held)
            CommandSlot.objects.create(user_id="bob", slot=0, expires_at=clock.now())
            CommandSlot.objects.create(user_id="bob", slot=0, expires_at=clock.now())

    with pytest.raises(IntegrityError):
        free_then_break()
    # Then the error is Django's, nothing of the transaction stayed, and the connection works on
    assert list(CommandSlot.objects.values_list("user_id", flat=True)) == ["alice"]


def test_a_failure_halfway_through_an_execs_bookkeeping_undoes_what_it_wrote(transactional_db):
    # Given a slot alice holds
    held = CommandSlot.objects.create(user_id="alice", slot=0, expires_at=clock.now())

    # When the bookkeeping frees it and then fails before it commits
    def free_then_fail() -> None:
        with bookkeeping(savepoint=False, unread=True):
            slot_release(held)
            raise RuntimeError("the process failed here")

    with pytest.raises(RuntimeError):
        free_then_fail()
    # Then her slot is still held
    assert CommandSlot.objects.filter(user_id="alice").count() == 1


@pytest.fixture
def backend_opens(monkeypatch):
    """Runs `then(opened)` right after the backend opened a sandbox, before the exec goes on."""

    def install(then):
        backend = lifecycle.backend_at("local")
        original = backend.open

        def open_then(**kwargs):
            opened = original(**kwargs)
            then(opened)
            return opened

        monkeypatch.setattr(backend, "open", open_then)
        return backend

    return install


def test_an_exec_that_opens_a_sandbox_stores_its_id_size_and_use_on_the_ledgers_row(
    transactional_db, alice_api, make_item
):
    # Given alice's notebook with no sandbox, each request in transactions of its own
    item = make_item()
    # When her command opens one
    body = _exec(alice_api, item, "true").json()
    # Then the ledger's row holds the sandbox's id, its enforced size, and that it was used
    row = SandboxActivity.current.get(item_id=item.pk)
    assert (row.backend_sandbox_id, row.cpu_cores, row.memory_bytes) == (body["sandbox_id"], 1.0, 512 * MIB)
    assert row.last_used_at is not None
    assert row.lease_expires_at > clock.now()
    assert not RunningExec.objects.exists()
    assert not CommandSlot.objects.exists()


@pytest.mark.postgres(reason="its transaction ids say which writes went together")
def test_on_postgresql_an_opening_exec_stores_the_sandboxs_id_in_the_transaction_that_records_the_command(
    transactional_db, alice_api, make_item, monkeypatch
):
    # Given PostgreSQL, alice's notebook with no sandbox, and the transaction of the ledger's
    # attach and of the command's record watched
    seen: dict[str, int] = {}

    def watched(name, original):
        def run(**kwargs):
            with connection.cursor() as cursor:
                cursor.execute("SELECT txid_current()")
                seen[name] = cursor.fetchone()[0]
            return original(**kwargs)

        return run

    monkeypatch.setattr(lifecycle.ledger, "activity_attach", watched("attach", ledger.activity_attach))
    monkeypatch.setattr(lifecycle.running, "exec_record", watched("record", lifecycle.running.exec_record))
    # When her command opens one
    assert _exec(alice_api, make_item(), "true").status_code == 200
    # Then the sandbox's id and the command's record were written in one transaction
    assert seen["attach"] == seen["record"]


def test_a_sandbox_closed_while_its_opening_exec_starts_is_closed_and_the_exec_is_409_with_nothing_run(
    alice_api, make_item, backend_opens
):
    # Given alice's notebook, whose sandbox someone closes the moment it has opened
    item = make_item()
    closed = []

    def close_the_row(opened) -> None:
        row = SandboxActivity.current.get(item_id=item.pk)
        ledger.activity_close(activity_id=row.pk, reason=SandboxActivity.CloseReason.CLOSED, closed_by="bob")
        closed.append(opened.id)

    backend = backend_opens(close_the_row)
    # When her command would run in it
    response = _exec(alice_api, item, "touch ran")
    # Then it is 409 sandbox_closed, the sandbox is gone, nothing ran, and her slot is free
    assert response.status_code == 409
    assert response.json()["error"] == "sandbox_closed"
    assert not backend.probe(closed[0])
    assert not (lifecycle.workspace_dir(item.pk) / "ran").exists()
    assert not CommandSlot.objects.exists()
    assert not RunningExec.objects.exists()


def test_when_the_first_write_of_an_opening_exec_fails_its_sandbox_is_closed_and_the_next_command_opens_another(
    alice_api, make_item, monkeypatch
):
    # Given alice's notebook, and the command's record failing once (the database went away)
    item = make_item()
    original = lifecycle.running.exec_record
    failures = []

    def fail_once(**kwargs):
        if not failures:
            failures.append(kwargs["activity"].backend_sandbox_id)
            raise DatabaseError("the connection broke")
        return original(**kwargs)

    monkeypatch.setattr(lifecycle.running, "exec_record", fail_once)
    # When her command opens a sandbox and fails, then she runs it again
    with pytest.raises(DatabaseError):
        _exec(alice_api, item, "true")
    again = _exec(alice_api, item, "echo again")
    # Then the first sandbox was closed with its row, and the second command opened a new one at once
    assert not lifecycle.backend_at("local").probe(failures[0])
    assert SandboxActivity.objects.get(backend_sandbox_id="").close_reason == SandboxActivity.CloseReason.FAILED
    assert (again.status_code, again.json()["stdout"], again.json()["sandbox_opened"]) == (200, "again\n", True)
    assert again.json()["sandbox_id"] != failures[0]

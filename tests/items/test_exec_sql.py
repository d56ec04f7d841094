"""The hand-written statements of every exec (the item's read, the command's record, the person's
slot given back) agree with the ORM."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.forms.models import model_to_dict
from django.http import Http404

from collab import clock as clock_module
from collab.actor import Actor
from collab.errors import Forbidden
from collab.models import CommandSlot
from collab.slots import slot_release, slot_take
from quotas.models import SandboxActivity
from workspace.items import running
from workspace.items.access import item_for, item_for_exec
from workspace.items.models import Item, RunningExec

pytestmark = pytest.mark.django_db


def _activity(item, *, lease: timedelta = timedelta(minutes=5), host: str = "") -> SandboxActivity:
    """A live sandbox row of the item (a record is written only while its sandbox's row counts)."""
    return SandboxActivity.objects.create(
        item_id=str(item.pk),
        app_slug=item.app_slug,
        owner="alice",
        backend="http" if host else "local",
        host=host,
        backend_sandbox_id="loc-1",
        lease_expires_at=clock_module.now() + lease,
    )


def test_a_commands_record_is_stored_as_the_orm_would_store_it(make_item, clock):
    # Given alice's item with a sandbox
    item = make_item()
    # When a command with a 30 s limit and a long argument list is recorded
    running.exec_record(
        exec_id="a" * 32,
        item=item,
        requested_by="alice",
        command=["echo", "x" * 300],
        activity=_activity(item),
        timeout=30,
    )
    # Then the ORM reads it back whole: its shown command cut at 200 characters, ending 90 s on
    now = clock_module.now()
    assert model_to_dict(RunningExec.objects.get(pk="a" * 32)) == {
        "exec_id": "a" * 32,
        "item": item.pk,
        "requested_by": "alice",
        "command": ("echo " + "x" * 300)[:200],
        "backend": "local",
        "host": "",
        "backend_sandbox_id": "loc-1",
        "started_at": now,
        "ends_by": now + timedelta(seconds=90),
        "stopped_by": "",
    }
    assert [record.exec_id for record in running.running_of_item(item)] == ["a" * 32]


def test_a_command_on_a_pool_host_is_recorded_with_its_host_so_a_stop_reaches_it(make_item, clock):
    # Given alice's item whose sandbox runs on a host of the pool
    item = make_item()
    # When a command of hers is recorded
    running.exec_record(
        exec_id="b" * 32,
        item=item,
        requested_by="alice",
        command="sleep 1",
        activity=_activity(item, host="http://sandbox-2:8100"),
        timeout=30,
    )
    # Then its record names the host as well as the backend
    record = RunningExec.objects.get(pk="b" * 32)
    assert (record.backend, record.host) == ("http", "http://sandbox-2:8100")


def test_a_command_that_reads_as_sql_is_recorded_as_its_text(make_item, clock):
    # Given alice's item
    item = make_item()
    hostile = "echo it's'); DELETE FROM items_item; --"
    # When a command whose text would end a quoted SQL string is recorded
    running.exec_record(
        exec_id="c" * 32, item=item, requested_by="alice", command=hostile, activity=_activity(item), timeout=30
    )
    # Then it is stored as its text, and nothing else changed
    assert RunningExec.objects.get(pk="c" * 32).command == hostile
    assert Item.objects.filter(pk=item.pk).exists()


def test_forgetting_a_command_removes_its_record_only(make_item, clock):
    # Given two recorded commands
    item = make_item()
    for exec_id in ("a" * 32, "b" * 32):
        running.exec_record(
            exec_id=exec_id, item=item, requested_by="alice", command="true", activity=_activity(item), timeout=30
        )
    # When the first ends
    running.exec_forget("a" * 32)
    # Then only the second is left
    assert list(RunningExec.objects.values_list("exec_id", flat=True)) == ["b" * 32]


def test_a_slot_is_given_back_only_while_it_is_still_its_holders(clock, settings):
    # Given alice's two slots, the second of which outlived its expiry and was taken over
    settings.WORKSPACE_EXEC_CONCURRENCY_PER_USER = 2
    mine = slot_take(user_id="alice", seconds=30)
    stale = slot_take(user_id="alice", seconds=30)
    CommandSlot.objects.filter(pk=stale.pk).update(expires_at=stale.expires_at + timedelta(minutes=5))
    # When both holders give theirs back
    slot_release(mine)
    slot_release(stale)
    # Then the first is free, and the one taken over stays with its new holder
    assert list(CommandSlot.objects.values_list("pk", flat=True)) == [stale.pk]


@pytest.mark.parametrize("item_id", [0, -1, 2**63, 10**30])
def test_an_item_id_no_column_can_hold_names_no_item(make_item, item_id):
    # Given alice's item
    make_item()
    # When a service asks for an item by an id out of the column's range
    # Then it is not found (404), not a database error
    with pytest.raises(Http404):
        item_for("notebook", item_id, actor=Actor("alice"))


def test_an_item_is_read_only_within_its_app(make_item):
    # Given alice's notebook
    item = make_item()
    # When it is asked for as hers in its app, and in another app
    app, found = item_for("notebook", item.pk, actor=Actor("alice"))
    # Then it is found in its own, as the ORM reads it, and not in the other
    assert model_to_dict(found) == model_to_dict(Item.objects.get(pk=item.pk))
    assert app.slug == "notebook"
    with pytest.raises(Http404):
        item_for("rca", item.pk, actor=Actor("alice"))


def test_an_exec_reads_its_item_and_the_items_live_row_in_one_statement_as_the_orm_reads_them(
    make_item, clock, django_assert_num_queries
):
    # Given alice's item with a closed row and two live rows, and another item's newer live row
    item, other = make_item(), make_item()
    _activity(item).delete()
    older = _activity(item, lease=timedelta(minutes=5))
    clock.advance(seconds=1)
    newest = _activity(item, lease=timedelta(minutes=5))
    SandboxActivity.objects.filter(pk=older.pk).update(is_deleted=True)
    clock.advance(seconds=1)
    _activity(other)
    # When an exec of hers reads its item
    with django_assert_num_queries(1):
        app, found, live = item_for_exec("notebook", item.pk, actor=Actor("alice"))
    # Then the item and its newest live row are each as the ORM reads them
    assert app.slug == "notebook"
    assert model_to_dict(found) == model_to_dict(Item.objects.get(pk=item.pk))
    assert live.row.pk == newest.pk
    assert model_to_dict(live.row) == model_to_dict(SandboxActivity.objects.get(pk=newest.pk))
    assert live.row.opened_at.tzinfo is not None


def test_an_exec_of_an_item_without_a_live_sandbox_reads_none(make_item, clock):
    # Given alice's item whose only sandbox row ran out of lease
    item = make_item()
    _activity(item, lease=timedelta(seconds=-1))
    # When an exec of hers reads its item
    _, found, live = item_for_exec("notebook", item.pk, actor=Actor("alice"))
    # Then it finds the item, and no live row
    assert found.pk == item.pk
    assert live.row is None


@pytest.mark.parametrize("item_id", [0, -1, 2**63, 10**30])
def test_an_exec_of_an_item_id_no_column_can_hold_is_404(make_item, item_id):
    # Given alice's item
    make_item()
    # When an exec names an id out of the column's range
    # Then it is not found (404), not a database error
    with pytest.raises(Http404):
        item_for_exec("notebook", item_id, actor=Actor("alice"))


def test_a_strangers_exec_is_404_even_where_a_sandbox_is_live(make_item, clock):
    # Given alice's item with a live sandbox
    item = make_item()
    _activity(item)
    # When bob's exec reads it, or alice's through another app
    # Then neither learns it exists
    with pytest.raises(Http404):
        item_for_exec("notebook", item.pk, actor=Actor("bob"))
    with pytest.raises(Http404):
        item_for_exec("rca", item.pk, actor=Actor("alice"))


def test_the_payer_of_someone_elses_item_may_not_exec_there(make_item, clock):
    # Given an item carol created and bob pays for, with a live sandbox
    item = make_item(created_by="carol", owner="bob")
    _activity(item)
    # When bob's exec reads it
    # Then it is 403 payer_only: he knows it exists, and may only tend it
    with pytest.raises(Forbidden) as refused:
        item_for_exec("notebook", item.pk, actor=Actor("bob"))
    assert refused.value.error == "payer_only"


@pytest.mark.parametrize("ended", ["expired", "closed"])
def test_a_command_is_not_recorded_in_a_sandbox_whose_row_stopped_counting(make_item, clock, ended):
    # Given alice's item whose sandbox row ran out of lease, or was closed
    item = make_item()
    row = _activity(item)
    if ended == "expired":
        clock.advance(minutes=6)
    else:
        SandboxActivity.objects.filter(pk=row.pk).update(is_deleted=True)
    # When a command is recorded there
    running.exec_record(exec_id="a" * 32, item=item, requested_by="alice", command="true", activity=row, timeout=30)
    # Then nothing is written: nobody can list or stop a command that will not run there
    assert not RunningExec.objects.exists()

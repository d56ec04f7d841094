"""The hand-written statements of every exec (the command's record, the person's slot given back)
agree with the ORM."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.forms.models import model_to_dict

from collab import clock as clock_module
from quotas.models import SandboxActivity
from workspace.items.models import ExecSlot, RunningExec
from workspace.items.sandboxes import running
from workspace.items.services import exec_slot_release, exec_slot_take

pytestmark = pytest.mark.django_db


def _activity(item) -> SandboxActivity:
    return SandboxActivity(
        item_id=str(item.pk), app_slug=item.app_slug, owner="alice", backend="local", backend_sandbox_id="loc-1"
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
        "backend_sandbox_id": "loc-1",
        "started_at": now,
        "ends_by": now + timedelta(seconds=90),
        "stopped_by": "",
    }
    assert [record.exec_id for record in running.running_of_item(item)] == ["a" * 32]


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
    mine = exec_slot_take(user_id="alice", seconds=30)
    stale = exec_slot_take(user_id="alice", seconds=30)
    ExecSlot.objects.filter(pk=stale.pk).update(expires_at=stale.expires_at + timedelta(minutes=5))
    # When both holders give theirs back
    exec_slot_release(mine)
    exec_slot_release(stale)
    # Then the first is free, and the one taken over stays with its new holder
    assert list(ExecSlot.objects.values_list("pk", flat=True)) == [stale.pk]

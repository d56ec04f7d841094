"""A person's command slots (collab/slots.py): one object holds a command's slot from wherever it
is taken until it is given back, once; a model's knowledge-base answer takes one only where a
model writes it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from collab import clock
from collab.models import CommandSlot
from collab.slots import SlotForCommand, TooManyRunning, answer_slot_take, slot_take

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_at_once(settings) -> int:
    settings.WORKSPACE_EXEC_CONCURRENCY_PER_USER = 2
    return 2


def test_a_slot_taken_before_the_command_starts_is_not_taken_again_when_it_starts(two_at_once):
    # Given alice's slot for a command, taken up front (as before a sandbox opens)
    slot = SlotForCommand(user_id="alice", seconds=30)
    slot.take()
    # When the command starts
    claims = slot.claims_when_starting
    slot.starting()
    # Then nothing more is taken: she holds one slot
    assert claims is False
    assert CommandSlot.objects.filter(user_id="alice").count() == 1


def test_a_slot_claimed_when_the_command_starts_is_taken_once_and_given_back_once(two_at_once):
    # Given alice's slot, to be claimed in the transaction that records the command
    slot = SlotForCommand(user_id="alice", seconds=30)
    slot.claim_when_starting()
    # When the command starts twice over (a second attempt in a new sandbox) and then ends
    slot.starting()
    held = CommandSlot.objects.filter(user_id="alice").count()
    slot.starting()
    slot.ended()
    slot.release()
    # Then one slot was held while it ran, and none is left
    assert held == 1
    assert not CommandSlot.objects.exists()


def test_after_a_claim_that_found_the_first_slot_held_the_start_takes_a_free_one(two_at_once):
    # Given bob's first slot is held by another request of his, and this command's claim failed on it
    other = slot_take(user_id="bob", seconds=30)
    slot = SlotForCommand(user_id="bob", seconds=30)
    # When the command starts again, looking for a free slot
    slot.take_when_starting()
    slot.starting()
    # Then it holds the second slot, beside the first
    assert slot.slot is not None
    assert slot.slot.slot == 1
    assert sorted(CommandSlot.objects.values_list("slot", flat=True)) == [0, other.slot + 1]


def test_a_start_past_the_persons_last_slot_is_refused(two_at_once):
    # Given carol runs two commands, the most she may
    held = [slot_take(user_id="carol", seconds=30) for _ in range(two_at_once)]
    slot = SlotForCommand(user_id="carol", seconds=30)
    slot.take_when_starting()
    # When a third starts / Then it is refused, and she still holds two
    with pytest.raises(TooManyRunning):
        slot.starting()
    assert CommandSlot.objects.filter(user_id="carol").count() == len(held)


def test_a_knowledge_base_answer_takes_no_slot_without_a_model(settings, two_at_once):
    # Given no model server is connected (answers quote passages, in milliseconds)
    settings.WORKSPACE_LLM_BASE_URL = ""
    # When alice asks a question / Then it holds no slot
    assert answer_slot_take(user_id="alice") is None
    assert not CommandSlot.objects.exists()


def test_a_knowledge_base_answer_a_model_writes_holds_a_slot(settings, two_at_once):
    # Given a model server writes the answers
    settings.WORKSPACE_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    # When alice asks a question / Then she holds one of her slots while it is answered
    assert answer_slot_take(user_id="alice") is not None
    assert CommandSlot.objects.filter(user_id="alice").count() == 1


@pytest.mark.django_db(transaction=True)
def test_moving_the_slots_to_collab_keeps_every_held_slot():
    # Given the database as it was when the items app held the slots, with a slot alice holds
    executor = MigrationExecutor(connection)
    before = [("items", "0004_payer_record_running_execs"), ("collab", "0004_inbox_version")]
    executor.migrate(before)
    held_until = clock.now()
    old = MigrationExecutor(connection).loader.project_state(before).apps
    old.get_model("items", "ExecSlot").objects.create(user_id="alice", slot=0, expires_at=held_until)
    # When the migrations that move them run
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    # Then collab holds her slot, as it was
    assert list(CommandSlot.objects.values_list("user_id", "slot", "expires_at")) == [("alice", 0, held_until)]

"""Command slots: how many commands (an exec, a terminal, a manual workflow run, a chat turn, a
model's answer) one person runs through requests at once, WORKSPACE_EXEC_CONCURRENCY_PER_USER at
most. Each feature that runs something for a person takes a slot here and gives it back; a slot a
dead process left frees itself at its expiry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import Error as DbApiError
from django.db import transaction

from collab import clock
from collab.errors import TooManyRequests
from collab.models import CommandSlot
from collab.rows import PlannedStatement, answer_later, bookkeeping, execute
from collab.waits import ReleasedAfter

# How long a person refused for running too many commands is told to wait: most end within seconds.
RETRY_AFTER_SECONDS = 5
# A slot outlives its command's time limit by this much before it counts as left by a dead process.
_SLOT_MARGIN = timedelta(seconds=60)
# Every command takes a slot and gives it back, so both are written as SQL (see `_slot_insert`;
# building the ORM's delete and its collector took longer than running it: bench/exec.py).
_SLOTS = CommandSlot._meta.db_table
_SLOT_INSERT = (
    f"INSERT INTO {_SLOTS} (user_id, slot, expires_at) VALUES (%s, %s, %s) "
    "ON CONFLICT (user_id, slot) DO NOTHING RETURNING id"
)
# Slot 0 without looking (`slot_claim_first`): a held one breaks the unique key.
_SLOT_CLAIM = PlannedStatement(
    "command_slot_claim", f"INSERT INTO {_SLOTS} (user_id, slot, expires_at) VALUES (%s, %s, %s) RETURNING id"
)
_SLOT_RELEASE = PlannedStatement("command_slot_release", f"DELETE FROM {_SLOTS} WHERE id = %s AND expires_at = %s")
_SLOT_TAKE_OVER = f"UPDATE {_SLOTS} SET expires_at = %s WHERE id = %s AND expires_at = %s RETURNING id"


class TooManyRunning(TooManyRequests):
    """The person already runs as many commands as they may at once; come back in `retry_after` seconds."""

    def __init__(self, *, limit: int) -> None:
        super().__init__(
            error="too_many_running_commands",
            detail=(
                f"You already have {limit} commands running at once, the most you may. "
                f"Wait for one to finish and try again in {RETRY_AFTER_SECONDS} seconds."
            ),
            retry_after=RETRY_AFTER_SECONDS,
            limit=limit,
        )


def slot_take(*, user_id: str, seconds: float) -> CommandSlot | None:
    """One of the person's WORKSPACE_EXEC_CONCURRENCY_PER_USER slots for a command of up to
    `seconds` (None when there is no limit); TooManyRunning when all are taken.

    No lock: each slot number is a unique row, so two requests racing for the last one cannot
    both get it; the loser tries the next number, and past the last one is refused.
    """
    limit = settings.WORKSPACE_EXEC_CONCURRENCY_PER_USER
    if limit <= 0:
        return None
    moment = clock.now()
    expires_at = _slot_expiry(moment, seconds)
    # Most commands start with nothing else of the person's running: slot 0 is free, one INSERT
    # takes it without reading the others first.
    first = _slot_insert(user_id=user_id, number=0, expires_at=expires_at)
    if first is not None:
        return first
    held = {
        number: (pk, until)
        for pk, number, until in CommandSlot.objects.filter(user_id=user_id).values_list("pk", "slot", "expires_at")
    }
    for number in range(limit):
        if number not in held:
            taken = _slot_insert(user_id=user_id, number=number, expires_at=expires_at)
            if taken is None:
                continue  # another request of the same person took this one a moment ago
            return taken
        pk, until = held[number]
        # Left by a process that died: taken over by compare-and-set, so two requests cannot both.
        if until <= moment and _slot_take_over(pk=pk, held_until=until, expires_at=expires_at):
            return CommandSlot(pk=pk, user_id=user_id, slot=number, expires_at=expires_at)
    raise TooManyRunning(limit=limit)


def slot_claim_first(*, user_id: str, seconds: float) -> Callable[[], CommandSlot | None]:
    """Sends the statement that takes the person's first command slot, without looking at the
    others, and returns the reader of the slot, to call once its transaction committed (None
    when there is no limit). Most commands start with nothing else of the person's running: then
    the slot costs that transaction no round trip of its own (on PostgreSQL it goes with the
    COMMIT). When the slot is held, the statement breaks its unique key and fails the transaction
    it is part of (IntegrityError): the caller redoes it with `slot_take`."""
    if settings.WORKSPACE_EXEC_CONCURRENCY_PER_USER <= 0:
        return lambda: None
    connection = transaction.get_connection()
    expires_at = _slot_expiry(clock.now(), seconds)
    row = answer_later(
        _SLOT_CLAIM, [user_id, 0, connection.ops.adapt_datetimefield_value(expires_at)], connection=connection
    )

    def claimed() -> CommandSlot | None:
        try:
            pk = row()[0]
        except DbApiError:
            # Its transaction failed before the claim had an answer (a timeout, a dropped
            # connection): nothing of it was kept, and the failure itself is what the caller reports.
            return None
        return CommandSlot(pk=pk, user_id=user_id, slot=0, expires_at=expires_at)

    return claimed


def _slot_expiry(moment: datetime, seconds: float) -> datetime:
    return moment + timedelta(seconds=seconds) + _SLOT_MARGIN


def _slot_insert(*, user_id: str, number: int, expires_at: datetime) -> CommandSlot | None:
    """Slot `number` as a new row, or None when its row exists (taken, or left by a dead process).

    One statement that skips a taken number (`ON CONFLICT DO NOTHING`, on SQLite and PostgreSQL
    alike) instead of an INSERT that fails: nothing to roll back, so no savepoint around it in a
    caller's transaction, and an exec on a live sandbox saves two round trips to the database."""
    connection = transaction.get_connection()
    # Bookkeeping (collab.rows.bookkeeping): a slot a crash of the database server lost frees nothing
    # that its expiry would not, so it does not wait for the disk. In a transaction of its own on
    # PostgreSQL, the BEGIN, the INSERT and the COMMIT go in one round trip, and its RETURNING is
    # read after the COMMIT; inside a caller's transaction it is one more statement of it.
    with bookkeeping(savepoint=False, unread=True):
        answer = answer_later(
            _SLOT_INSERT, [user_id, number, connection.ops.adapt_datetimefield_value(expires_at)], connection=connection
        )
    row = answer()
    return None if row is None else CommandSlot(pk=row[0], user_id=user_id, slot=number, expires_at=expires_at)


def _slot_take_over(*, pk: int, held_until: datetime, expires_at: datetime) -> bool:
    """Whether slot `pk`, held until `held_until`, is now this request's until `expires_at`.

    Read by RETURNING, not the row count: a live exec takes its slot inside its bookkeeping's
    pipelined transaction on PostgreSQL, where only a reader waits for the statement's result."""
    connection = transaction.get_connection()
    adapt = connection.ops.adapt_datetimefield_value
    taken = answer_later(_SLOT_TAKE_OVER, [adapt(expires_at), pk, adapt(held_until)], connection=connection)
    return taken() is not None


def slot_extend(slot: CommandSlot, *, seconds: float) -> CommandSlot | None:
    """`slot`, held now for up to `seconds` more; None when it is no longer its holder's (it
    outlived its expiry and another command took it over, or it was given back)."""
    expires_at = _slot_expiry(clock.now(), seconds)
    if not _slot_take_over(pk=slot.pk, held_until=slot.expires_at, expires_at=expires_at):
        return None
    return CommandSlot(pk=slot.pk, user_id=slot.user_id, slot=slot.slot, expires_at=expires_at)


def slot_release(slot: CommandSlot | None) -> None:
    # Only while it is still this holder's: a slot that outlived its expiry may be someone else's now.
    if slot is not None:
        connection = transaction.get_connection()
        expires_at = connection.ops.adapt_datetimefield_value(slot.expires_at)
        execute(connection, _SLOT_RELEASE, [slot.pk, expires_at])


@contextmanager
def slot_held(*, user_id: str, seconds: float) -> Iterator[None]:
    """Holds one of the person's command slots (`slot_take`) while the block runs."""
    slot = slot_take(user_id=user_id, seconds=seconds)
    try:
        yield
    finally:
        slot_release(slot)


class SlotForCommand:
    """One person's slot for one command, given back once: with the command's record when it ends
    (one commit), or when the request fails or goes away before that.

    Taken before the command's sandbox opens (`take`), or in the transaction that records the
    command (`claim_when_starting`: the first slot without looking, one round trip for that whole
    transaction; `take_when_starting` after such a claim found the first slot held). The exec's
    lifecycle calls `starting` in that transaction and `ended` in the one that ends the record.
    """

    def __init__(self, *, user_id: str, seconds: float) -> None:
        self.user_id = user_id
        self.seconds = seconds
        self.slot: CommandSlot | None = None
        self._claimed: Callable[[], CommandSlot | None] | None = None
        self._when_starting: Callable[[], None] | None = None

    def take(self) -> None:
        """`slot_take` now (TooManyRunning when all are taken)."""
        self.slot = slot_take(user_id=self.user_id, seconds=self.seconds)

    def claim_when_starting(self) -> None:
        self._when_starting = self._claim_first

    def take_when_starting(self) -> None:
        """The claim's transaction was rolled back (the first slot is held): there is nothing of it
        to read or give back, and the next start looks for a free slot."""
        self._claimed = None
        self._when_starting = self.take

    @property
    def claims_when_starting(self) -> bool:
        """Whether `starting` takes the slot: its transaction then fails when another holds it."""
        return self._when_starting is not None

    def starting(self) -> None:
        """In the transaction that records the command: the slot is taken there, once."""
        when_starting, self._when_starting = self._when_starting, None
        if when_starting is not None:
            when_starting()

    def ended(self) -> None:
        """In the transaction that ends the command's record."""
        self.release()

    def release(self) -> None:
        claimed, self._claimed = self._claimed, None
        slot = self.slot if claimed is None else claimed()
        self.slot = None
        slot_release(slot)

    def _claim_first(self) -> None:
        # `slot_claim_first`: the slot is read when it is given back.
        self._claimed = slot_claim_first(user_id=self.user_id, seconds=self.seconds)


def slot_released_after(events: Iterator[Any], slot: CommandSlot | None) -> Iterator[Any]:
    """`events`, then `slot` given back: when they end, or when this is closed, started or not."""
    return ReleasedAfter(events, lambda: slot_release(slot))


def answer_slot_take(*, user_id: str) -> CommandSlot | None:
    """One of the person's slots while a model writes a knowledge-base answer (None without a
    model: a quoted answer takes milliseconds). It holds a connection to the model server for up
    to WORKSPACE_LLM_CONNECT_TIMEOUT + WORKSPACE_LLM_TIMEOUT, so one person cannot keep the model
    server busy with questions asked at once."""
    if not settings.WORKSPACE_LLM_BASE_URL:
        return None
    return slot_take(user_id=user_id, seconds=settings.WORKSPACE_LLM_CONNECT_TIMEOUT + settings.WORKSPACE_LLM_TIMEOUT)

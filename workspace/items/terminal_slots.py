"""A terminal holds one of its opener's command slots (collab/slots.py) while a command runs in it.

A shell waiting at its prompt runs nothing; `top`, a build or a REPL in its foreground does, and
counts as one of the person's WORKSPACE_EXEC_CONCURRENCY_PER_USER running commands, as an exec
would. The sandbox's keeper says when that changes (`Busy`), to whichever server process relays the
terminal then; the slot is remembered on the terminal's row, so that a reload or another window
does not take a second one. A command that runs on after its page went away keeps its slot: the
keeper closes a terminal nobody attached to for WORKSPACE_TERMINAL_IDLE_SECONDS, and the slot
expires by then (it is renewed while a page is attached, each time the keeper says so again).
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction

from collab import clock
from collab.errors import TooManyRequests
from collab.models import CommandSlot
from collab.slots import TooManyRunning, slot_extend, slot_release, slot_take
from workspace.items.models import Terminal
from workspace.sandboxes.terminals import BUSY_REPEAT_SECONDS

# A terminal that never closes for idleness (WORKSPACE_TERMINAL_IDLE_SECONDS = 0) holds a detached
# command's slot this long at most.
_NEVER_IDLE_SLOT_SECONDS = 24 * 3600


def terminal_slot_seconds() -> int:
    """How long a terminal's slot is held past its last renewal: until the keeper would have closed
    the terminal for idleness, with the renewals' own period to spare."""
    idle = settings.WORKSPACE_TERMINAL_IDLE_SECONDS
    return idle + BUSY_REPEAT_SECONDS if idle > 0 else _NEVER_IDLE_SLOT_SECONDS


def terminal_busy(*, terminal_id: str, running: bool) -> TooManyRequests | None:
    """The terminal's slot taken (or renewed) when a command runs in it, given back when none does;
    why the command may not run when its opener's slots are all taken."""
    with transaction.atomic():
        row = Terminal.objects.select_for_update().filter(pk=terminal_id, closed_at=None).first()
        if row is None:
            return None
        held = _held(row)
        if not running:
            if held is not None:
                slot_release(held)
                _remember(row, None)
            return None
        seconds = terminal_slot_seconds()
        renewed = slot_extend(held, seconds=seconds) if held is not None else None
        if renewed is None:
            try:
                renewed = slot_take(user_id=row.opened_by, seconds=seconds)
            except TooManyRunning as refused:
                _remember(row, None)
                return TooManyRequests(
                    error=refused.error,
                    detail=f"{refused.detail} The command in this terminal was stopped, as Ctrl-Z would: "
                    "type fg to go on with it.",
                    retry_after=refused.retry_after,
                    **refused.extra,
                )
        _remember(row, renewed)
    return None


def terminal_slots_release(terminal_ids: list[str], *, closed_at: datetime | None = None) -> None:
    """Gives back the slots the terminals hold; `closed_at` also closes them (their sandbox closed)."""
    with transaction.atomic():
        rows = list(Terminal.objects.select_for_update().filter(pk__in=terminal_ids, closed_at=None))
        for row in rows:
            slot_release(_held(row))
        changes: dict[str, object] = {"slot_id": None, "slot_expires_at": None}
        if closed_at is not None:
            changes["closed_at"] = closed_at
        Terminal.objects.filter(pk__in=[row.pk for row in rows]).update(**changes)


def terminals_close_with_sandbox(activity_id: int) -> None:
    """The terminals of a sandbox that closed are closed too, their slots given back."""
    open_ids = list(Terminal.objects.filter(activity_id=activity_id, closed_at=None).values_list("pk", flat=True))
    if open_ids:
        terminal_slots_release(open_ids, closed_at=clock.now())


def _held(row: Terminal) -> CommandSlot | None:
    if row.slot_id is None or row.slot_expires_at is None:
        return None
    return CommandSlot(pk=row.slot_id, user_id=row.opened_by, slot=0, expires_at=row.slot_expires_at)


def _remember(row: Terminal, slot: CommandSlot | None) -> None:
    row.slot_id = None if slot is None else slot.pk
    row.slot_expires_at = None if slot is None else slot.expires_at
    row.save(update_fields=["slot_id", "slot_expires_at"])

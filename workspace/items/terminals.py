"""Terminals of an item: an interactive shell in its sandbox, for the person who opened it.

Opening one goes through the quota gate as an exec does (the item's sandbox, opened through
admission when none is live) and counts against WORKSPACE_TERMINALS_PER_USER; its shell runs in the
sandbox's boundary, kept by the sandbox's agent (workspace/sandboxes/terminals.py), so it outlives
its page and the server process that opened it, and closes with the sandbox. A terminal is its
opener's alone: anyone else, staff included, is told there is no such terminal (404).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import Http404

from collab import clock
from collab.actor import Actor
from collab.errors import Conflict, Invalid, TooManyRequests
from collab.waits import request_threads
from quotas import ledger
from quotas.models import AdmissionLock, SandboxActivity
from workspace.items import lifecycle
from workspace.items.config import AppDescriptor, get_config
from workspace.items.models import Item, Terminal
from workspace.items.terminal_slots import terminal_busy, terminal_slots_release
from workspace.sandboxes.base import SandboxGone, SandboxHostUnreachable, SandboxUnavailable
from workspace.sandboxes.terminal_relay import CLOSE_GONE, relay
from workspace.sandboxes.terminals import (
    MAX_SIZE,
    TerminalGone,
    TerminalLink,
    TerminalRefused,
    checked_size,
    new_secret,
)

# How long a person refused for having too many terminals open is told to wait: closing one is enough.
TERMINAL_RETRY_AFTER_SECONDS = 5


def terminal_scope(*, item: Item, actor: Actor) -> QuerySet[Terminal]:
    """The item's open terminals that are `actor`'s, in SQL: opened by them, in a sandbox still live."""
    live = SandboxActivity.current.filter(item_id=str(item.pk)).values("pk")
    rows = Terminal.objects.filter(item=item, opened_by=actor.user_id, closed_at=None, activity_id__in=live)
    return rows.select_related("item").order_by("opened_at")


def terminal_for(*, item: Item, terminal_id: str, actor: Actor) -> Terminal:
    """The open terminal of the item, if it is `actor`'s; else 404, as for one that never was."""
    terminal = terminal_scope(item=item, actor=actor).filter(terminal_id=terminal_id).first()
    if terminal is None:
        raise Http404("No such terminal.")
    return terminal


def terminal_open(*, item: Item, app: AppDescriptor, actor: Actor, rows: Any, cols: Any) -> Terminal:
    """A new terminal in the item's sandbox for `actor`: 400 for a size out of bounds, 429 past their
    open terminals, the sandbox's own refusals (507 at a quota, 503) as an exec meets them."""
    try:
        rows, cols = checked_size(_count(rows), _count(cols))
    except (TypeError, TerminalRefused):
        raise Invalid(
            error="invalid_terminal_size",
            detail=f"A terminal has 1 to {MAX_SIZE} rows and columns, given as whole numbers.",
        ) from None
    terminal = _reserved(item=item, actor=actor, rows=rows, cols=cols)
    try:
        activity, _opened = lifecycle.sandbox_for_item(item=item, app=app)
        # Work in a terminal is use of the sandbox: it is not reclaimed as idle under it.
        ledger.heartbeat(activity_id=activity.pk, lease=get_config().sandbox.lease, used=True)
        backend = lifecycle.backend_of(activity)
        try:
            link = _start(backend, activity, terminal)
        except SandboxHostUnreachable as exc:
            raise lifecycle.unavailable_error(exc) from exc
        except (SandboxUnavailable, SandboxGone) as exc:
            raise Conflict(error="terminal_unavailable", detail=_unavailable_detail(exc)) from exc
    except BaseException:
        Terminal.objects.filter(pk=terminal.pk).delete()
        raise
    link.detach()
    terminal.activity_id, terminal.backend, terminal.host, terminal.backend_sandbox_id = (
        activity.pk,
        activity.backend,
        activity.host,
        activity.backend_sandbox_id,
    )
    terminal.save(update_fields=["activity_id", "backend", "host", "backend_sandbox_id"])
    return terminal


# A terminal's row is written before its sandbox opens (`_reserved`), so that the person's open
# terminals are counted with it; one whose opening died with its process stops counting after this.
_OPENING_SECONDS = 120


def _reserved(*, item: Item, actor: Actor, rows: int, cols: int) -> Terminal:
    """A row for the terminal about to open, written while the person's terminals are counted under
    their lock, so that requests racing for their last terminal cannot all get it (429 past it)."""
    limit = settings.WORKSPACE_TERMINALS_PER_USER
    with transaction.atomic():
        AdmissionLock.objects.get_or_create(owner=actor.user_id)
        AdmissionLock.objects.select_for_update().filter(owner=actor.user_id).first()
        opening = Q(activity_id=0, opened_at__gt=clock.now() - timedelta(seconds=_OPENING_SECONDS))
        opened = Terminal.objects.filter(opened_by=actor.user_id, closed_at=None).filter(
            Q(activity_id__in=SandboxActivity.current.values("pk")) | opening
        )
        if limit > 0 and opened.count() >= limit:
            raise TooManyRequests(
                error="too_many_terminals",
                detail=f"You have {limit} terminals open, the most you may. Close one and try again.",
                retry_after=TERMINAL_RETRY_AFTER_SECONDS,
                limit=limit,
            )
        return Terminal.objects.create(
            terminal_id=uuid.uuid4().hex,
            item=item,
            opened_by=actor.user_id,
            activity_id=0,
            secret=new_secret(),
            rows=rows,
            cols=cols,
        )


def terminal_close(*, item: Item, terminal_id: str, actor: Actor) -> None:
    """Closes `actor`'s terminal: its shell is hung up and whatever of it is left killed."""
    terminal = terminal_for(item=item, terminal_id=terminal_id, actor=actor)
    backend = lifecycle.backend_of(terminal)
    # Gone already (its sandbox closed meanwhile): the row is all that is left of it.
    with contextlib.suppress(TerminalGone, SandboxGone, SandboxUnavailable, OSError):
        link = backend.terminal_attach(
            terminal.backend_sandbox_id, terminal_id=terminal.terminal_id, secret=terminal.secret
        )
        link.close_terminal()
    terminal_slots_release([terminal.pk], closed_at=clock.now())


@dataclass(frozen=True)
class TerminalSocket:
    """A terminal's WebSocket, authorised: `attach(receive, send)` relays it on the event loop."""

    terminal: Terminal
    since: int

    async def attach(self, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]) -> None:
        backend = lifecycle.backend_of(self.terminal)
        try:
            link = backend.terminal_attach(
                self.terminal.backend_sandbox_id,
                terminal_id=self.terminal.terminal_id,
                secret=self.terminal.secret,
                since=self.since,
            )
        except (SandboxGone, SandboxUnavailable, OSError):
            await send({"type": "websocket.close", "code": 1011})
            return
        loop = asyncio.get_running_loop()

        async def busy(running: bool) -> TooManyRequests | None:
            changed = functools.partial(terminal_busy, terminal_id=self.terminal.pk, running=running)
            return await loop.run_in_executor(request_threads(), changed)

        ended = await relay(link, receive, send, client_timeout=settings.WORKSPACE_CLIENT_TIMEOUT_SECONDS, busy=busy)
        if ended == CLOSE_GONE:
            # Its keeper is gone (closed for idleness, or with its sandbox): so is the terminal.
            await loop.run_in_executor(request_threads(), self._forget)

    def _forget(self) -> None:
        terminal_slots_release([self.terminal.pk], closed_at=clock.now())


def terminal_socket(*, item: Item, terminal_id: str, actor: Actor, since: str) -> TerminalSocket:
    """The WebSocket of `actor`'s terminal, replaying its kept output from offset `since`."""
    terminal = terminal_for(item=item, terminal_id=terminal_id, actor=actor)
    try:
        offset = int(since or 0)
    except ValueError:
        offset = -1
    # At most 18 digits: what the sandbox's keeper reads (exec_agent.pl).
    if not 0 <= offset < 10**18:
        raise Invalid(error="invalid_offset", detail="`since` is the output offset to replay from: a whole number.")
    return TerminalSocket(terminal, offset)


def _start(backend: Any, activity: SandboxActivity, terminal: Terminal) -> TerminalLink:
    start = getattr(backend, "terminal_start", None)
    if start is None:
        raise SandboxUnavailable("this sandbox backend has no terminals yet")
    return start(
        activity.backend_sandbox_id,
        terminal_id=terminal.terminal_id,
        secret=terminal.secret,
        rows=terminal.rows,
        cols=terminal.cols,
        idle_seconds=settings.WORKSPACE_TERMINAL_IDLE_SECONDS,
    )


def _unavailable_detail(exc: Exception) -> str:
    if "opened before terminals" in str(exc):
        return str(exc)
    return "A terminal cannot be opened in this sandbox right now. Try again, or close the sandbox and open a new one."


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("not a whole number")
    return value

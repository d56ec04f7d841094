"""The pool of sandbox hosts (DESIGN.md §5 "Many sandbox machines"): what each host offers, where a
new sandbox goes, which hosts answer, and drains.

A host's capacity comes from its own `/healthz`, kept on its `SandboxHost` row; what is used of it
is what the ledger counts live there. Placement runs inside the admission's transaction and locks
the pool's rows first, so two opens at once cannot both take a host's last room: the one that
waited reads the other's new row (docs/ARCHITECTURE.md §8, the same discipline as the quota gate).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction

from collab import clock
from collab.errors import DomainError, Misconfigured, Unavailable
from quotas import ledger
from quotas.values import SandboxSize, host_name
from workspace.items.config import get_config
from workspace.items.models import SandboxHost
from workspace.sandboxes.base import MISCONFIGURED, HostCapacity, SandboxUnavailable
from workspace.sandboxes.http import HttpBackend
from workspace.sandboxes.registry import host_token
from workspace.sandboxes.share import share_problem
from workspace.sandboxes.volumes import disk_enforcement, workspaces_root

logger = logging.getLogger(__name__)

# How long a caller waits before asking again when no host takes a sandbox or the item's host
# does not answer: about one refresh of the pool's reports.
HOST_RETRY_AFTER_SECONDS = 30
# A report younger than this is not asked for again when a sandbox is placed.
REPORT_FRESH = timedelta(seconds=15)
# A host not heard from for longer than this takes no new sandbox (a worker refreshes every host
# far more often; without one, placement itself asks).
REPORT_STALE = timedelta(minutes=2)
# A health call that takes longer than this counts as no answer: placement waits for it.
HEALTH_TIMEOUT_SECONDS = 2.0


def pool_urls() -> tuple[str, ...]:
    """The configured hosts ([sandbox] hosts); none for the local backend."""
    sandbox = get_config().sandbox
    return sandbox.hosts if sandbox.backend == "http" else ()


def _rows_ensured(urls: Iterable[str]) -> None:
    SandboxHost.objects.bulk_create([SandboxHost(url=url) for url in urls], ignore_conflicts=True)


def hosts_refresh(*, older_than: timedelta = REPORT_FRESH) -> int:
    """Asks each configured host whose report is older than `older_than` for its `/healthz`, all at
    once, and keeps what it said (or why it did not answer). Returns how many were asked."""
    urls = pool_urls()
    if not urls:
        return 0
    checked = dict(SandboxHost.objects.filter(url__in=urls).values_list("url", "checked_at"))
    if missing := [url for url in urls if url not in checked]:
        _rows_ensured(missing)
    now = clock.now()
    since = now - older_than
    # Each due host is claimed (compare and set on `checked_at`): of many opens that find its report
    # old at once, one asks it, and the others place by the report they read.
    due = [
        url
        for url in urls
        if (checked.get(url) is None or checked[url] <= since)
        and SandboxHost.objects.filter(url=url, checked_at=checked.get(url)).update(checked_at=now)
    ]
    if not due:
        return 0
    for url, (report, problem) in hosts_asked(due).items():
        if report is None:
            host_heard(url=url, problem=problem)
        else:
            host_heard(url=url, report=report, problem=_refusal(report))
    return len(due)


def hosts_asked(urls: list[str]) -> dict[str, tuple[dict | None, str]]:
    """Each host's `/healthz` as kept (`kept_report`), all asked at once: None and why, from a host
    that did not answer in HEALTH_TIMEOUT_SECONDS in all (a host that trickles its answer too)."""
    threads = ThreadPoolExecutor(max_workers=min(len(urls), 16), thread_name_prefix="host-health")
    asked = {threads.submit(_health, url): url for url in urls}
    finished, _late = wait(asked, timeout=HEALTH_TIMEOUT_SECONDS)
    # A late call runs on in its thread until its socket times out; nobody waits for it.
    threads.shutdown(wait=False, cancel_futures=True)
    late = (None, f"it did not answer /healthz within {HEALTH_TIMEOUT_SECONDS:g} s")
    return {url: future.result() if future in finished else late for future, url in asked.items()}


def _health(url: str) -> tuple[dict | None, str]:
    try:
        answer = HttpBackend(url, token=host_token(url), timeout=HEALTH_TIMEOUT_SECONDS).health()
    except SandboxUnavailable as exc:
        return None, str(exc)[:500]
    except Exception as exc:  # whatever a host answers, the pool goes on: it is one host that failed
        logger.exception("sandbox host %s answered /healthz with something unreadable", url)
        return None, f"its /healthz answer could not be read: {type(exc).__name__}"
    return kept_report(answer), ""


def kept_report(answer: dict) -> dict:
    """What the pool keeps of a host's `/healthz`: its capacity, defaults and workspaces, each checked
    and bounded (a host's answer is stored, so nothing of it may be what the database refuses)."""
    capacity = HostCapacity.from_report(answer.get("capacity"))
    defaults = answer.get("defaults") if isinstance(answer.get("defaults"), dict) else {}
    workspaces = answer.get("workspaces") if isinstance(answer.get("workspaces"), dict) else {}
    return {
        "capacity": capacity.as_dict() if capacity else None,
        "defaults": {
            "cpu_cores": _number(defaults.get("cpu_cores")),
            "memory_bytes": _whole(defaults.get("memory_bytes")),
        },
        "workspaces": {
            key: value
            for key in ("marker", "disk_enforcement", "machine")
            if isinstance(value := workspaces.get(key), str) and len(value) <= 100 and value.isprintable()
        },
    }


def _refusal(report: dict) -> str:
    """Why a host that answered takes no sandbox all the same, or ""."""
    if report.get("capacity") is None:
        return (
            "it reports no capacity the pool can place by (SANDBOX_HOST_CAPACITY_CPU, _MEMORY, _SANDBOXES): "
            "an older host, or values that make no sense"
        )
    # Where its workspaces are not the app's, its sandboxes would not see the files people upload.
    return share_problem(report.get("workspaces"), workspaces_root(), disk_enforcement=disk_enforcement())


def host_heard(*, url: str, report: dict | None = None, problem: str = "") -> None:
    """Keeps the outcome of a call to the host at `url`: its report when it answered (with `problem`,
    why it takes no sandbox all the same), else (no report) why it did not answer."""
    now = clock.now()
    if problem:
        logger.warning("sandbox host %s takes no sandbox: %s", url, problem)
    if report is None:
        SandboxHost.objects.filter(url=url).update(
            checked_at=now, answered=False, problem=problem[:500] or "it did not answer"
        )
    else:
        SandboxHost.objects.filter(url=url).update(
            checked_at=now, seen_at=now, answered=True, report=report, problem=problem[:500]
        )


def host_unreachable_noted(*, url: str, problem: str) -> None:
    """A call to the host failed for want of an answer: no new sandbox goes there until it answers."""
    _rows_ensured([url])
    host_heard(url=url, problem=problem)


@dataclass(frozen=True)
class HostState:
    """One host of the pool as placement sees it: what it offers, what the ledger counts there."""

    url: str
    capacity: HostCapacity | None
    defaults: SandboxSize
    used: ledger.HostUsage
    answers: bool
    draining: bool
    problem: str = ""
    # It answered its last health call, with a reason to take no sandbox (workspaces not shared).
    refuses: bool = False

    @property
    def name(self) -> str:
        return host_name(self.url)

    @property
    def takes_sandboxes(self) -> bool:
        return self.answers and not self.draining and self.capacity is not None

    def charged(self, size: SandboxSize) -> tuple[float, int]:
        """The cpu and memory a sandbox of `size` takes here: undeclared (None) or unlimited (0)
        dimensions take what the host enforces by default."""
        cpu = size.cpu_cores or self.defaults.cpu_cores or 0.0
        memory = size.memory_bytes or self.defaults.memory_bytes or 0
        return float(cpu), int(memory)

    @property
    def cpu_used(self) -> float:
        return self.used.cpu_cores + self.used.default_cpu * (self.defaults.cpu_cores or 0.0)

    @property
    def memory_used(self) -> int:
        return self.used.memory_bytes + self.used.default_memory * (self.defaults.memory_bytes or 0)

    def room_after(self, size: SandboxSize) -> float | None:
        """The smallest share of any dimension left free once a sandbox of `size` is placed here
        (0..1, higher is emptier); None when it does not fit."""
        if self.capacity is None:
            return None
        cpu, memory = self.charged(size)
        shares = [
            (self.capacity.cpu_cores - self.cpu_used - cpu) / self.capacity.cpu_cores,
            (self.capacity.memory_bytes - self.memory_used - memory) / self.capacity.memory_bytes,
        ]
        if self.capacity.sandboxes is not None:
            shares.append((self.capacity.sandboxes - self.used.sandboxes - 1) / self.capacity.sandboxes)
        least = min(shares)
        return least if least >= 0 else None

    @property
    def _trouble(self) -> str:
        return "misconfigured" if self.refuses else "unreachable"

    def as_report(self) -> dict:
        """What `/healthz` and admin say of the host."""
        state = "draining" if self.draining else ("ok" if self.answers else self._trouble)
        return {
            "host": self.name,
            "url": self.url,
            "state": state,
            "capacity": self.capacity.as_dict() if self.capacity else None,
            "used": {"cpu_cores": self.cpu_used, "memory_bytes": self.memory_used, "sandboxes": self.used.sandboxes},
            **({"problem": self.problem} if self.problem else {}),
        }


def pool_state(urls: Collection[str] | None = None, *, locked: bool = False) -> list[HostState]:
    """Each configured host with what it offers and what the ledger counts there, in config order;
    `locked` (inside the caller's transaction) holds the rows until it commits."""
    urls = pool_urls() if urls is None else urls
    if not urls:
        return []
    rows = SandboxHost.objects.filter(url__in=urls).order_by("id")
    if locked:
        rows = rows.select_for_update()
    by_url = {row.url: row for row in rows}
    usage = ledger.live_usage_by_host(urls)
    fresh_since = clock.now() - REPORT_STALE
    states = []
    for url in urls:
        row = by_url.get(url)
        report = row.report if row is not None and isinstance(row.report, dict) else {}
        defaults = report.get("defaults") if isinstance(report.get("defaults"), dict) else {}
        states.append(
            HostState(
                url=url,
                capacity=HostCapacity.from_report(report.get("capacity")),
                defaults=SandboxSize(
                    cpu_cores=_number(defaults.get("cpu_cores")), memory_bytes=_whole(defaults.get("memory_bytes"))
                ),
                used=usage.get(url, ledger.HostUsage()),
                answers=bool(row and row.answered and not row.problem and row.seen_at and row.seen_at > fresh_since),
                draining=bool(row and row.draining),
                problem=row.problem if row else "",
                refuses=bool(row and row.answered and row.problem),
            )
        )
    return states


def _number(value: object) -> float | None:
    # NaN and infinity fail the comparison, as does a 400-digit number.
    return (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 2**62 else None
    )


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**62 else None


def placed_host(*, size: SandboxSize, excluding: Collection[str] = ()) -> str:
    """The host a new sandbox of `size` goes to: of the hosts that answer and are not drained, the
    one with the most room left once it is placed. Call it inside the transaction that records the
    sandbox's row: it locks the pool's rows until that commits. 503 with Retry-After when none
    takes it (`sandbox_pool_full` when hosts answer but none has room)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("placed_host runs inside the admission's transaction")
    urls = [url for url in pool_urls() if url not in excluding]
    states = pool_state(urls, locked=True)
    taking = [state for state in states if state.takes_sandboxes]
    if not taking:
        raise _none_taking(states)
    rooms = [
        (room, -index, state) for index, state in enumerate(taking) if (room := state.room_after(size)) is not None
    ]
    if not rooms:
        raise Unavailable(
            error="sandbox_pool_full",
            detail="Every sandbox host is full right now, so nothing ran. A sandbox closing makes room: try again "
            "in a moment.",
            retry_after=HOST_RETRY_AFTER_SECONDS,
        )
    return max(rooms, key=lambda entry: entry[:2])[2].url


def _none_taking(states: list[HostState]) -> DomainError:
    silent = [state.name for state in states if not state.answers and not state.draining and not state.refuses]
    if not silent and any(state.refuses for state in states):
        return Misconfigured(
            error=MISCONFIGURED,
            detail="No sandbox host of this server can take sandboxes because of how it is configured, so nothing "
            "ran; waiting will not help. Please tell its administrator (/healthz says what to fix).",
        )
    if not silent:
        return Unavailable(
            error="sandbox_hosts_drained",
            detail="Every sandbox host is drained for maintenance, so nothing ran. Try again in a moment.",
            retry_after=HOST_RETRY_AFTER_SECONDS,
        )
    names = ", ".join(silent)
    return Unavailable(
        error="sandbox_host_unreachable",
        detail=f"No sandbox host that takes new sandboxes answers right now ({names}), so nothing ran. "
        "Try again in a moment.",
        retry_after=HOST_RETRY_AFTER_SECONDS,
        host=names,
    )


def host_drain(*, url: str, draining: bool, by: str) -> int:
    """Drains the host (no new sandbox goes there) or puts it back; returns 1 when it changed."""
    _rows_ensured([url])
    return SandboxHost.objects.filter(url=url, draining=not draining).update(
        draining=draining, drained_by=by if draining else "", drained_at=clock.now() if draining else None
    )

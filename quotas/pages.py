"""Quota pages: my-resources (what the person uses against their limits) and closing a sandbox from it."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from collab.actor import Actor, actor_of
from collab.errors import NotFound
from collab.sizes import format_bytes
from collab.web import attempt, identity_required
from quotas import selectors, services
from quotas.sizes import format_size


def usage_rows(summed: selectors.MyResources | selectors.ResourcesAtAGlance) -> list[dict[str, object]]:
    """Sandboxes, cores, memory and disk against their limits, as people read them (the last row is disk)."""
    usage, limits = summed.usage, summed.limits
    return [
        _usage_row("Sandboxes", usage.count, limits.count),
        _usage_row("CPU cores", usage.cpu, limits.cpu),
        _usage_row("Memory", usage.memory, limits.memory, size=True),
        _usage_row("Disk", summed.disk_in_use, limits.disk, size=True),
    ]


def _usage_row(label: str, used: float, limit: float | None, *, size: bool = False) -> dict[str, object]:
    shown = format_bytes if size else (lambda value: f"{value:g}")
    full = limit is not None and used >= limit
    # 100 only at the limit, so the meter turns red exactly when nothing more fits (its `high`
    # is 99): 99.6% of a limit is not yet refused.
    percent = None if not limit else 100 if full else min(99, round(used * 100 / limit))
    return {
        "label": label,
        "used": shown(used),
        "limit": "no limit" if limit is None else shown(limit),
        "percent": percent,
        "full": full,
    }


@identity_required
def my_resources_page(request: HttpRequest) -> HttpResponse:
    mine = selectors.my_resources(actor=actor_of(request))
    *sandbox_rows, disk_row = usage_rows(mine)
    context = {
        "mine": mine,
        "sandbox_rows": sandbox_rows,
        "disk_row": disk_row,
        "live": [{"sandbox": sandbox, "memory": format_size(sandbox.memory)} for sandbox in mine.live],
        "live_on_hosts": any(sandbox.host for sandbox in mine.live),
    }
    return render(request, "quotas/my_resources.html", context)


@identity_required
@require_POST
def my_sandbox_close_page(request: HttpRequest, item_id: str) -> HttpResponse:
    actor = actor_of(request)
    closed = attempt(request, lambda: _sandbox_closed(actor=actor, item_id=item_id))
    if closed is not None:
        messages.success(request, "The sandbox is shut down." if closed else "There was no live sandbox.")
    return HttpResponseRedirect(reverse("my-resources"))


def _sandbox_closed(*, actor: Actor, item_id: str) -> int:
    try:
        return services.my_sandbox_close(actor=actor, item_id=item_id)
    except NotFound as exc:
        # The page says why it may be gone: closed meanwhile (a sweep, another tab) or never theirs.
        raise NotFound(error=exc.error, detail="That sandbox is not live any more, or it is not yours.") from exc

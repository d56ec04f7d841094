"""Work items: the things that own a workspace directory and, while in use, a sandbox."""

from __future__ import annotations

from django.db import models

from collab import clock
from collab.models import TrackedModel


class Item(TrackedModel):
    """An item of one app (a notebook, an investigation...).

    The `owner` column holds the payer (the quota debtor) and nothing more; permissions follow
    `created_by`, the creator (spec "Resources", Work item). A blank owner is the creator: read
    who pays through `payer` (`payer_of`), never the column alone.
    """

    app_slug = models.CharField(max_length=64)
    title = models.CharField(max_length=200)
    owner = models.CharField(max_length=150, blank=True, default="")
    # A handover of the bill waiting for its addressee (docs/ARCHITECTURE.md §5 "Nobody is billed without
    # consent"): `owner` changes only when `pending_owner` accepts on their My resources page.
    pending_owner = models.CharField(max_length=150, blank=True, default="")
    pending_owner_requested_by = models.CharField(max_length=150, blank=True, default="")
    pending_owner_requested_at = models.DateTimeField(null=True, blank=True)
    # How the payer, when it is not the creator, came to pay: who named them and when, and whether
    # staff assigned the bill without asking (`owner_assigned`) rather than the payer agreeing (they
    # accepted a handover, or named themselves). My resources shows the payer this record; the
    # spec fixes the notification kinds, so there is no notification of it.
    owner_named_by = models.CharField(max_length=150, blank=True, default="")
    owner_named_at = models.DateTimeField(null=True, blank=True)
    owner_assigned = models.BooleanField(default=False)

    class Meta:
        indexes = [
            # An app's items of one creator, newest first: the list page.
            models.Index(fields=["app_slug", "created_by", "-id"], name="item_app_creator_idx"),
            # One creator's items of every app, newest first: the home page.
            models.Index(fields=["created_by", "-id"], name="item_creator_idx"),
            models.Index(fields=["owner"], name="item_owner_idx"),
            # The handovers waiting for one person (their My resources page); most items have none.
            models.Index(
                fields=["pending_owner"],
                name="item_pending_owner_idx",
                condition=~models.Q(pending_owner=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.app_slug}/{self.pk}: {self.title}"

    @property
    def payer(self) -> str:
        return payer_of(owner=self.owner, creator=self.created_by)


def payer_of(*, owner: str, creator: str) -> str:
    """Who pays for an item, from its `owner` and `created_by` columns: the owner, else the creator.
    The one place of that rule, for callers that read the columns without loading an `Item`."""
    return owner or creator


class HandoverEvent(models.Model):
    """What became of a handover of an item's bill, kept for the person it concerns (`told`): who
    asked learns it was accepted or declined, the creator that the payer handed it back. Append-only;
    the spec fixes the notification kinds, so their dashboard shows these instead."""

    class Outcome(models.TextChoices):
        ACCEPTED = "accepted", "accepted"
        DECLINED = "declined", "declined"
        RETURNED = "returned", "handed back"

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="handover_events")
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    by = models.CharField(max_length=150)
    told = models.CharField(max_length=150)
    at = models.DateTimeField(default=clock.now)

    class Meta:
        # One person's latest news, newest first: the home page.
        indexes = [models.Index(fields=["told", "-at"], name="handover_event_told_idx")]

    def __str__(self) -> str:
        return f"{self.item_id} {self.outcome} by {self.by}"


class RunningExec(models.Model):
    """A command running in an item's sandbox for a person (the terminal, the exec API), so it
    can be listed and stopped from another request or process without closing the sandbox.

    The row goes when the command ends; one whose process died stops counting at `ends_by`
    (its time limit and a margin). `stopped_by` is set just before the stop kills it, so the
    command's result can say who stopped it.
    """

    exec_id = models.CharField(max_length=64, primary_key=True)
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="running_execs")
    requested_by = models.CharField(max_length=150)
    command = models.CharField(max_length=200)  # its first characters, for the list
    backend = models.CharField(max_length=20)
    host = models.CharField(max_length=200, blank=True, default="")  # its sandbox host (http backend)
    backend_sandbox_id = models.CharField(max_length=100)
    started_at = models.DateTimeField(default=clock.now)
    ends_by = models.DateTimeField()
    stopped_by = models.CharField(max_length=150, blank=True, default="")

    def __str__(self) -> str:
        return f"exec {self.exec_id} of {self.requested_by} in item {self.item_id}"


class Terminal(models.Model):
    """An interactive shell in an item's sandbox, opened by one person (workspace/items/terminals.py).

    Its PTY and its kept output live in the sandbox (its agent's keeper); this row says whose it is,
    which sandbox holds it, and when it closed. A terminal is its opener's alone, as a shell is; one
    whose sandbox closed is closed too.
    """

    terminal_id = models.CharField(max_length=32, primary_key=True)
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="terminals")
    opened_by = models.CharField(max_length=150)
    activity_id = models.BigIntegerField()  # the sandbox's ledger row (quotas.SandboxActivity)
    backend = models.CharField(max_length=20)
    host = models.CharField(max_length=200, blank=True, default="")  # its sandbox host (http backend)
    backend_sandbox_id = models.CharField(max_length=100)
    # What an attach says to the sandbox's keeper of it, so that code in the sandbox cannot attach.
    secret = models.CharField(max_length=128)
    rows = models.PositiveSmallIntegerField()
    cols = models.PositiveSmallIntegerField()
    opened_at = models.DateTimeField(default=clock.now)
    closed_at = models.DateTimeField(null=True, blank=True)
    # The opener's command slot (collab.CommandSlot) while a command runs in the terminal's
    # foreground: its id and the expiry it was taken or last renewed with (workspace/items/terminal_slots.py).
    slot_id = models.BigIntegerField(null=True, blank=True)
    slot_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # One person's open terminals: the per-person cap, and an item's list.
            models.Index(fields=["opened_by", "item"], name="terminal_opener_idx", condition=models.Q(closed_at=None)),
        ]

    def __str__(self) -> str:
        return f"terminal {self.terminal_id} of {self.opened_by} in item {self.item_id}"


class SandboxHost(models.Model):
    """A sandbox host of the pool (`[sandbox] hosts`), as the app last heard from it, and whether an
    operator drains it (DESIGN.md §5 "Many sandbox machines").

    The config names the hosts; a row holds what the config cannot: the host's last `/healthz`
    report (its capacity and defaults), whether that call answered, and the drain. Placement locks
    these rows, so two opens cannot both take a host's last room.
    """

    url = models.CharField(max_length=200, unique=True)
    # The last /healthz answer ({"capacity": ..., "defaults": ..., "workspaces": ...}) and when it
    # came; `checked_at` is the last try and `answered` whether it was answered; `problem` says why
    # the host takes no sandbox (blank: it does), from a call that failed or from what it answered
    # (its workspaces are not the app's).
    report = models.JSONField(default=dict, blank=True)
    seen_at = models.DateTimeField(null=True, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    answered = models.BooleanField(default=False)
    problem = models.CharField(max_length=500, blank=True, default="")
    # A drained host takes no new sandboxes; the ones it runs finish, or an operator closes them.
    draining = models.BooleanField(default=False)
    drained_by = models.CharField(max_length=150, blank=True, default="")
    drained_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.url

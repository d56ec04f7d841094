"""Quota records: sandbox liveness evidence, measured workspace disk, per-user overrides, payer locks."""

from __future__ import annotations

from django.db import models

from collab import clock
from collab.models import TrackedModel
from quotas.values import SandboxSize


class OpenActivityManager(models.Manager):
    """Rows not soft-deleted; the ledger's every query goes through this (spec rule 2)."""

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().filter(is_deleted=False)


class SandboxActivity(models.Model):
    """One sandbox's life: who pays for it, its resolved size and the latest evidence it is alive.

    The item is referenced by its id as a string, not a foreign key, so `quotas` never imports
    `workspace` (docs/ARCHITECTURE.md §2). Nothing here counts: "live" is derived at read time from
    `is_deleted` and `lease_expires_at`, so a crashed process that never says goodbye simply
    stops counting once its lease runs out.
    """

    class CloseReason(models.TextChoices):
        CLOSED = "closed", "Closed by a person"
        IDLE = "idle", "Idle reclaim"
        EXPIRED = "expired", "Liveness expired"
        GONE = "gone", "Backend reports it gone"
        FAILED = "failed", "Failed to open"
        DISK = "disk", "Workspace over its disk limit"

    item_id = models.CharField(max_length=64)
    app_slug = models.CharField(max_length=64)
    owner = models.CharField(max_length=150)
    backend = models.CharField(max_length=20)
    # The sandbox host it was placed on (its URL), for the http backend; blank for the local one.
    host = models.CharField(max_length=200, blank=True, default="")
    # Empty while the backend is still opening it; the row already counts so that a
    # concurrent open of the same payer sees it.
    backend_sandbox_id = models.CharField(max_length=100, blank=True, default="")
    # Resolved sizes: None = unspecified (the backend's default applies), 0 = explicitly unlimited.
    cpu_cores = models.FloatField(null=True, blank=True)
    memory_bytes = models.BigIntegerField(null=True, blank=True)
    pids_max = models.IntegerField(null=True, blank=True)
    # Whether cpu and memory count towards the payer's per-user totals: only sandboxes of apps
    # that declare a cost do (spec "Limits" 5). Fixed at admission, so a later config change
    # does not re-price sandboxes that are already running.
    charges_cost = models.BooleanField(default=False)
    opened_at = models.DateTimeField(default=clock.now)
    last_seen_at = models.DateTimeField(default=clock.now)
    last_used_at = models.DateTimeField(default=clock.now)
    lease_expires_at = models.DateTimeField()
    is_deleted = models.BooleanField(default=False)
    closed_at = models.DateTimeField(null=True, blank=True)
    close_reason = models.CharField(max_length=20, choices=CloseReason.choices, blank=True, default="")
    # Who closed it, when a person did (My resources, the item page, the API): a command it
    # stopped says so by name. Blank for the service's own closes (idle, expiry, disk).
    closed_by = models.CharField(max_length=150, blank=True, default="")

    objects = models.Manager()
    current = OpenActivityManager()

    @property
    def size(self) -> SandboxSize:
        return SandboxSize(cpu_cores=self.cpu_cores, memory_bytes=self.memory_bytes, pids_max=self.pids_max)

    class Meta:
        verbose_name_plural = "sandbox activities"
        indexes = [
            # "Live rows of a payer": the admission gate's one query.
            models.Index(fields=["owner", "is_deleted", "lease_expires_at"], name="sbx_owner_live_idx"),
            # "The live sandbox of an item": every exec.
            models.Index(fields=["item_id", "is_deleted", "lease_expires_at"], name="sbx_item_live_idx"),
            # Idle reclaim scans open rows by last use.
            models.Index(fields=["is_deleted", "last_used_at"], name="sbx_idle_idx"),
            # What the ledger counts on each sandbox host: placement reads it for the whole pool.
            models.Index(fields=["host", "is_deleted", "lease_expires_at"], name="sbx_host_live_idx"),
        ]

    def __str__(self) -> str:
        return f"sandbox {self.backend}:{self.backend_sandbox_id or '?'} of item {self.item_id} ({self.owner})"


class WorkspaceDiskUsage(models.Model):
    """The last measured size of one item's workspace, fed by the mirror sweep."""

    item_id = models.CharField(max_length=64, unique=True)
    app_slug = models.CharField(max_length=64)
    owner = models.CharField(max_length=150, db_index=True)
    bytes = models.BigIntegerField(default=0)
    measured_at = models.DateTimeField(default=clock.now)
    is_deleted = models.BooleanField(default=False)

    objects = models.Manager()
    current = OpenActivityManager()

    class Meta:
        verbose_name_plural = "workspace disk usage"

    def __str__(self) -> str:
        return f"item {self.item_id} ({self.owner}): {self.bytes} bytes"


class UserResourceOverride(TrackedModel):
    """One person's per-user limits, read before the site defaults of `resources.per_user`.

    Per dimension: null = not overridden (the site default applies), 0 = unlimited (written as
    `"max"`), anything else is the limit. Count and cpu accept `"max"` too, which the spec's
    record could not express (spec "Limits" 13); a plain 0 there still means "not overridden".
    """

    user_id = models.CharField(max_length=150, primary_key=True)
    count = models.PositiveIntegerField(null=True, blank=True)
    cpu = models.FloatField(null=True, blank=True)
    memory = models.BigIntegerField(null=True, blank=True)
    disk = models.BigIntegerField(null=True, blank=True)

    class Meta:
        verbose_name = "per-user resource override"

    def __str__(self) -> str:
        return f"resource override of {self.user_id}"


class AdmissionLock(models.Model):
    """One row per sandbox payer (its `owner` column), locked FOR UPDATE while a new sandbox of theirs is admitted.

    The gate's check and the new activity row then form one step per payer (docs/ARCHITECTURE.md §8);
    locking a row of our own keeps the ledger itself free of long-held locks.
    """

    owner = models.CharField(max_length=150, primary_key=True)

    def __str__(self) -> str:
        return f"admission lock of {self.owner}"

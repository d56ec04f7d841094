"""Workflow runs and the schedule rows workers claim."""

from __future__ import annotations

from datetime import timedelta

from django.db import models

from collab.models import TrackedModel
from workspace.items.models import Item


class WorkflowRun(TrackedModel):
    """One execution of a workflow revision on an item, or the record of a run that could not start."""

    class Trigger(models.TextChoices):
        MANUAL = "manual", "Manual"
        SCHEDULED = "scheduled", "Scheduled"

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        NOT_RUN = "not_run", "Not run"

    workflow_id = models.CharField(max_length=100)
    # Its place among the runs of its workflow ("Run #3" is that workflow's third), given when it
    # is first saved (`workspace.workflows.services.run_numbered_save`); null only for a row
    # written some other way, which the unique pair below then leaves alone.
    number = models.PositiveIntegerField(null=True, blank=True)
    revision_id = models.CharField(max_length=200, blank=True, default="")
    # Null when the scheduled item no longer exists: the failure record must still be written.
    item = models.ForeignKey(Item, on_delete=models.SET_NULL, null=True, blank=True, related_name="workflow_runs")
    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    status = models.CharField(max_length=10, choices=Status.choices)
    reason = models.TextField(blank=True, default="")
    steps = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The schedule window a scheduled run belongs to (the `next_run_at` the scheduler claimed):
    # one record per window, however often its task is tried.
    window_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["workflow_id", "-id"], name="workflow_run_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_id", "window_at"],
                condition=models.Q(window_at__isnull=False),
                name="workflow_run_one_per_window",
            ),
            # Also the index that finds a workflow's last number.
            models.UniqueConstraint(fields=["workflow_id", "number"], name="workflow_run_number"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.workflow_id}: {self.status}"

    @property
    def duration(self) -> timedelta | None:
        """How long it ran; None while it runs and for a run that never started."""
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at


class WorkflowSchedule(models.Model):
    """When a scheduled workflow runs next; the row workers lock (SKIP LOCKED) to claim a due run."""

    workflow_id = models.CharField(max_length=100, unique=True)
    item_id = models.BigIntegerField()
    every_seconds = models.PositiveIntegerField()
    next_run_at = models.DateTimeField()
    last_claimed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["next_run_at"], name="workflow_schedule_due_idx")]

    def __str__(self) -> str:
        return f"{self.workflow_id} every {self.every_seconds}s"

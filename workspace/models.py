"""Work items: the things that own a workspace directory and, while in use, a sandbox."""

from __future__ import annotations

from django.db import models

from collab.models import TrackedModel


class Item(TrackedModel):
    """An item of one app (a notebook, an investigation...).

    `owner` is the quota debtor and nothing more; permissions follow `created_by` (spec
    "Resources", Work item). A blank owner falls back to the creator.
    """

    app_slug = models.CharField(max_length=64)
    title = models.CharField(max_length=200)
    owner = models.CharField(max_length=150, blank=True, default="")
    # A handover of the bill waiting for its addressee (DESIGN.md §5 "Nobody is billed without
    # consent"): `owner` changes only when `pending_owner` accepts on their My resources page.
    pending_owner = models.CharField(max_length=150, blank=True, default="")
    pending_owner_requested_by = models.CharField(max_length=150, blank=True, default="")
    pending_owner_requested_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # An app's items of one creator, newest first: the list page.
            models.Index(fields=["app_slug", "created_by", "-id"], name="item_app_creator_idx"),
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
    def debtor(self) -> str:
        return self.owner or self.created_by


class ItemMessage(TrackedModel):
    """One message of an item's conversation (chat panel, investigation); agent rows have no creator.

    `mentions` lists the user ids a `mention` message named (spec "Additions": default empty);
    `citations` keeps the markers of an agent's knowledge-base answer for display.
    """

    class Role(models.TextChoices):
        USER = "user", "User"
        AGENT = "agent", "Agent"
        MENTION = "mention", "Mention"
        SYSTEM = "system", "System"

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True, default="")
    mentions = models.JSONField(default=list, blank=True)
    citations = models.JSONField(default=list, blank=True)

    class Meta:
        indexes = [models.Index(fields=["item", "id"], name="item_message_idx")]

    def __str__(self) -> str:
        return f"{self.role} on {self.item_id}: {self.content[:40]}"


class Investigation(TrackedModel):
    """The investigation side of an item of the `rca` app: one id names both (DESIGN.md §6)."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        IN_PROGRESS = "in_progress", "In progress"
        RESOLVED = "resolved", "Resolved"
        CLOSED = "closed", "Closed"

    item = models.OneToOneField(Item, on_delete=models.CASCADE, primary_key=True, related_name="investigation")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)

    def __str__(self) -> str:
        return f"investigation {self.pk} ({self.status})"


class InvestigationMember(TrackedModel):
    investigation = models.ForeignKey(Investigation, on_delete=models.CASCADE, related_name="members")
    user_id = models.CharField(max_length=150)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["investigation", "user_id"], name="investigation_member_once"),
        ]
        # "Investigations where I am a member": the list page and the item access check.
        indexes = [models.Index(fields=["user_id", "investigation"], name="investigation_member_user_idx")]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.investigation_id}"


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
            )
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.workflow_id}: {self.status}"


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


class WorkerBeat(models.Model):
    """The last sign of life of one `manage.py worker` process, written from its heartbeat thread."""

    worker_id = models.CharField(max_length=64, primary_key=True)
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"worker {self.worker_id} on {self.hostname} (pid {self.pid})"


class PeriodicJob(models.Model):
    """When a periodic task is next enqueued; a worker takes a due row by compare-and-set, so several
    workers enqueue each job once per interval between them."""

    name = models.CharField(max_length=100, primary_key=True)
    due_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} due {self.due_at:%Y-%m-%d %H:%M:%S}"

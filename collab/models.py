"""Tracking fields every domain row shares, and the notification resource."""

from __future__ import annotations

from django.db import models

from collab import clock


class TrackedModel(models.Model):
    """Who made a row and who last changed it; the creator is the one who holds permissions.

    Services pass `user_id` explicitly (`stamp_created` / `stamp_updated`): over HTTP it is the
    caller's id captured at the boundary, anywhere else the id the work was started for.
    """

    created_by = models.CharField(max_length=150, blank=True, default="")
    updated_by = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(default=clock.now, editable=False)
    updated_at = models.DateTimeField(default=clock.now)

    class Meta:
        abstract = True

    def stamp_created(self, user_id: str | None) -> None:
        moment = clock.now()
        self.created_by = self.updated_by = user_id or ""
        self.created_at = self.updated_at = moment

    def stamp_updated(self, user_id: str | None) -> None:
        self.updated_by = user_id or ""
        self.updated_at = clock.now()


class Notification(TrackedModel):
    class Kind(models.TextChoices):
        MENTION = "mention", "Mention"
        SHARE = "share", "Share"
        STATUS = "status", "Status change"
        # Reserved by the spec: accepted here, produced by nothing.
        ASSIGNMENT = "assignment", "Assignment"
        AGENT_DONE = "agent_done", "Agent done"
        SYSTEM = "system", "System"

    PRODUCED_KINDS = frozenset({Kind.MENTION, Kind.SHARE, Kind.STATUS})

    recipient = models.CharField(max_length=150)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True, default="")
    link = models.CharField(max_length=500, blank=True, default="")
    # None (or the literal "agent") when the agent triggered it.
    actor = models.CharField(max_length=150, null=True, blank=True, default=None)
    read = models.BooleanField(default=False)

    class Meta:
        indexes = [
            # The inbox order: unread first, then newest; also serves the unread count.
            models.Index(fields=["recipient", "read", "-created_at", "-id"], name="notif_inbox_idx"),
            # The inbox filtered to one kind (the notifications page's filter, `?kind=`).
            models.Index(fields=["recipient", "kind", "read", "-created_at", "-id"], name="notif_kind_idx"),
            # The latest change per recipient, read by the conditional-GET probe in one seek.
            models.Index(fields=["recipient", "updated_at"], name="notif_changed_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} to {self.recipient}: {self.title}"


class InboxVersion(models.Model):
    """One row per recipient whose number changes in the same transaction as anything in their
    inbox (a notification inserted, read, edited or deleted): the notification poll's ETag is this
    one primary-key read, however many notifications there are (collab.services.inbox_changed)."""

    recipient = models.CharField(max_length=150, primary_key=True)
    version = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.recipient}: {self.version}"


class ApiToken(TrackedModel):
    """A personal API token for scripts: `Authorization: Token <token>` (or `Bearer`).

    Only a SHA-256 of the token is stored (the token is 32 random bytes, so a fast hash is as
    safe as a slow one and costs nothing per request); `prefix` lets its creator recognise it.
    `created_by` is its creator: the token acts as them, with their rights at the moment of use.
    """

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["created_by", "-id"], name="api_token_owner_idx")]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name}, {self.created_by})"


class CommandSlot(models.Model):
    """A command one person has running through a request right now (an exec, a terminal, a manual
    workflow run, a chat turn, a model's answer). A person holds at most
    WORKSPACE_EXEC_CONCURRENCY_PER_USER slots; a row a process left when it died frees itself at
    `expires_at` (its command's own time limit, and a margin). `collab.slots` takes and gives them back."""

    user_id = models.CharField(max_length=150)
    slot = models.PositiveSmallIntegerField()
    expires_at = models.DateTimeField()

    class Meta:
        # The table it had when the items app held it: moving the model kept its rows.
        db_table = "items_execslot"
        constraints = [models.UniqueConstraint(fields=["user_id", "slot"], name="exec_slot_one_holder")]

    def __str__(self) -> str:
        return f"command slot {self.slot} of {self.user_id}"

"""The investigation side of `rca` items: status and members."""

from __future__ import annotations

from datetime import datetime

from django.db import models

from collab.models import TrackedModel
from workspace.items.models import Item


class Investigation(TrackedModel):
    """The investigation side of an item of the `rca` app: one id names both (docs/ARCHITECTURE.md §6)."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        IN_PROGRESS = "in_progress", "In progress"
        RESOLVED = "resolved", "Resolved"
        CLOSED = "closed", "Closed"

    item = models.OneToOneField(Item, on_delete=models.CASCADE, primary_key=True, related_name="investigation")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)

    def __str__(self) -> str:
        return f"investigation {self.pk} ({self.status})"

    @property
    def member_ids(self) -> list[str]:
        if self._state.adding:
            return []  # an rca item read before its first write: no row, so no members yet
        return [member.user_id for member in self.members.all()]

    @property
    def changed_at(self) -> datetime:
        """The later of its own change (status, members) and its item's (title, payer)."""
        return max(self.updated_at, self.item.updated_at)

    @property
    def item_url(self) -> str:
        return f"/a/{self.item.app_slug}/items/{self.item.pk}"


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

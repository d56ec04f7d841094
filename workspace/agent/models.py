"""An item's conversation: what people, mentions and the agent said on it."""

from __future__ import annotations

from django.db import models

from collab.models import TrackedModel
from workspace.items.models import Item


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

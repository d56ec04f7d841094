"""An item's conversation: what people, mentions and the agent said on it, and the agent's trail."""

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


class AgentStep(TrackedModel):
    """One step of the turn that ended in an agent message (its visible trail): a tool call with
    what came of it, or a note on the turn itself (older messages left out of what the model saw).

    Stored with its message in one transaction; `output` is what the model was given back, cut to
    WORKSPACE_AGENT_TOOL_OUTPUT_CHARS; `detail` holds what the page shows beside it (exit code,
    path and size, who was mentioned).
    """

    class Kind(models.TextChoices):
        TOOL = "tool", "Tool call"
        NOTE = "note", "Note"

    message = models.ForeignKey(ItemMessage, on_delete=models.CASCADE, related_name="steps")
    position = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=10, choices=Kind.choices)
    tool = models.CharField(max_length=40, blank=True, default="")
    arguments = models.JSONField(default=dict, blank=True)
    ok = models.BooleanField(default=True)
    summary = models.CharField(max_length=300)
    output = models.TextField(blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["message_id", "position"]
        constraints = [models.UniqueConstraint(fields=["message", "position"], name="agent_step_position_uniq")]

    def __str__(self) -> str:
        return f"step {self.position} of message {self.message_id}: {self.summary[:40]}"

"""Chat send and agent turns on an item's conversation."""

from __future__ import annotations

from django.apps import AppConfig


class AgentConfig(AppConfig):
    name = "workspace.agent"
    label = "agent"
    default_auto_field = "django.db.models.BigAutoField"

"""Chat send and agent turns on an item's conversation."""

from __future__ import annotations

import logging

from django.apps import AppConfig

logger = logging.getLogger("workspace.agent")


def model_agent_warnings() -> list[str]:
    """The apps that ask for the model agent while no provider is configured (they keep theirs)."""
    from django.conf import settings

    from workspace.items.config import get_config

    if settings.WORKSPACE_LLM_BASE_URL:
        return []
    return [
        f'{app.source}: app {app.slug!r} asks for the model agent (agent = "model"), but no model provider '
        "is configured (WORKSPACE_LLM_BASE_URL), so its chats keep the deterministic agent."
        for app in get_config().apps.values()
        if app.agent == "model"
    ]


class AgentConfig(AppConfig):
    name = "workspace.agent"
    label = "agent"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        for warning in model_agent_warnings():
            logger.warning(warning)

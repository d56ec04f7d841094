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


def check_turn_limits() -> None:
    """Start-up check: each bound of a model agent's turn leaves room for a turn to happen."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    minimums = {
        "WORKSPACE_AGENT_MAX_TOOL_CALLS": 1,
        "WORKSPACE_AGENT_TURN_SECONDS": 1,
        "WORKSPACE_AGENT_CONTEXT_TOKENS": 1000,
        "WORKSPACE_AGENT_TOOL_OUTPUT_CHARS": 100,
    }
    for name, least in minimums.items():
        if getattr(settings, name) < least:
            raise ImproperlyConfigured(f"{name} must be at least {least}, not {getattr(settings, name)}.")


class AgentConfig(AppConfig):
    name = "workspace.agent"
    label = "agent"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        check_turn_limits()
        for warning in model_agent_warnings():
            logger.warning(warning)

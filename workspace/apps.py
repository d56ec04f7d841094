"""The project package as an app: it owns the worker's heartbeats and the periodic schedule."""

from __future__ import annotations

from django.apps import AppConfig


class WorkspaceConfig(AppConfig):
    name = "workspace"
    default_auto_field = "django.db.models.BigAutoField"

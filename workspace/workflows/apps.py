"""Workflow definitions, runs and their scheduler."""

from __future__ import annotations

from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workspace.workflows"
    label = "workflows"
    default_auto_field = "django.db.models.BigAutoField"

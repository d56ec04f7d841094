"""Quotas app configuration: memos are dropped whenever the settings change."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core.signals import setting_changed


def _forget_memos(**_kwargs: Any) -> None:
    from quotas.limits import forget_memos

    # A settings change can name another config (other site defaults, other apps): memoised
    # overrides and item facts of the old one must not outlive it. Only tests change settings.
    forget_memos()


class QuotasConfig(AppConfig):
    name = "quotas"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        setting_changed.connect(_forget_memos, dispatch_uid="quotas-forget-memos")

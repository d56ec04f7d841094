"""Finds the CRUD systems a management command works on, from `--system` or `settings.CRUDGEN_SYSTEMS`."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from crudgen.system import CRUDSystem, load_system


def selected_systems(dotted_paths: list[str] | None) -> list[CRUDSystem]:
    paths = dotted_paths or list(getattr(settings, "CRUDGEN_SYSTEMS", []))
    if not paths:
        raise CommandError("name a system with --system or list them in settings.CRUDGEN_SYSTEMS")
    try:
        return [load_system(dotted) for dotted in paths]
    except ImproperlyConfigured as exc:
        raise CommandError(str(exc)) from exc

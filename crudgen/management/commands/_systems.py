"""Finds the CRUD systems a management command works on, from `--system` or `settings.CRUDGEN_SYSTEMS`."""

from __future__ import annotations

import importlib

from django.conf import settings
from django.core.management.base import CommandError

from crudgen.system import CRUDSystem


def load_system(dotted: str) -> CRUDSystem:
    """`package.module.attribute` or `package.module:attribute`."""
    module_path, _, attribute = dotted.replace(":", ".").rpartition(".")
    try:
        system = getattr(importlib.import_module(module_path), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise CommandError(f"cannot import CRUD system {dotted!r}: {exc}") from exc
    if not isinstance(system, CRUDSystem):
        raise CommandError(f"{dotted!r} is not a CRUDSystem")
    return system


def selected_systems(dotted_paths: list[str] | None) -> list[CRUDSystem]:
    paths = dotted_paths or list(getattr(settings, "CRUDGEN_SYSTEMS", []))
    if not paths:
        raise CommandError("name a system with --system or list them in settings.CRUDGEN_SYSTEMS")
    return [load_system(dotted) for dotted in paths]

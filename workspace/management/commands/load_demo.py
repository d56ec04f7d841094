"""Loads the demo data of every area; safe to run again (nothing is duplicated)."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.core.management.base import BaseCommand

# Each module exposes `load(*, say)`; order matters where one area's demo uses another's.
DEMO_LOADERS = [
    "collab.demo",
    "knowledge.demo",
    "workspace.items.demo",
    "workspace.workflows.demo",
    "workspace.investigations.demo",
]


class Command(BaseCommand):
    help = "Load the demo users and data (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        for dotted in DEMO_LOADERS:
            import_module(dotted).load(say=lambda line, area=dotted: self.stdout.write(f"[{area}] {line}"))
        self.stdout.write(self.style.SUCCESS("Demo data is loaded."))

"""`manage.py sweep`: measure every item's workspace and feed the disk ledger (the mirror sweep)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workspace.items.services import workspaces_sweep


class Command(BaseCommand):
    help = "Measure each item's workspace bytes and hand the figures to the disk ledger."

    def handle(self, *args: Any, **options: Any) -> None:
        measured = workspaces_sweep()
        self.stdout.write(f"Measured {measured} workspace(s).")

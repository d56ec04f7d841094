"""Loads the demo data of every area; safe to run again (nothing is duplicated)."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from collab.identity import mock_identity_enabled

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

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--with-real-accounts",
            action="store_true",
            help="Load even though identity is Django accounts: creates admin/admin and demo/demo logins.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # The demo creates known passwords (admin/admin, alice/demo) and grants staff: on a
        # deployment whose people sign in with real accounts that would open it to anyone.
        if not mock_identity_enabled() and not options["with_real_accounts"]:
            raise CommandError(
                "Refusing to load the demo: identity here is real Django accounts, and the demo creates "
                "logins with known passwords (admin/admin, alice/demo). Pass --with-real-accounts to do it anyway."
            )
        for dotted in DEMO_LOADERS:
            import_module(dotted).load(say=lambda line, area=dotted: self.stdout.write(f"[{area}] {line}"))
        self.stdout.write(self.style.SUCCESS("Demo data is loaded."))

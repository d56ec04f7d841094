"""Rewrite stored data of models registered with a migration to their current schema version."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from crudgen.management.commands._systems import selected_systems


class Command(BaseCommand):
    help = "Upgrade every stored revision to the current schema version of its model."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--system", action="append", help="dotted path of a CRUDSystem (repeatable)")

    def handle(self, *args: Any, **options: Any) -> None:
        for system in selected_systems(options["system"]):
            for name, changed in system.migrate_stored().items():
                self.stdout.write(f"{name}: {changed} resources migrated")

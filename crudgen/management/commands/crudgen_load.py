"""Read a crudgen dump back into the selected CRUD system."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from crudgen.backup import OnDuplicate
from crudgen.errors import DuplicateResource
from crudgen.management.commands._systems import selected_systems


class Command(BaseCommand):
    help = "Load a crudgen dump; --on-duplicate decides what happens to ids that already exist."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("input", help="dump file, '-' for stdin")
        parser.add_argument("--system", action="append", help="dotted path of the CRUDSystem to load into")
        parser.add_argument("--on-duplicate", choices=[p.value for p in OnDuplicate], default=OnDuplicate.OVERWRITE)

    def handle(self, *args: Any, **options: Any) -> None:
        (system,) = selected_systems(options["system"])[:1]
        try:
            if options["input"] == "-":
                report = system.load(sys.stdin, options["on_duplicate"])
            else:
                with open(options["input"], encoding="utf-8") as stream:
                    report = system.load(stream, options["on_duplicate"])
        except (DuplicateResource, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"loaded {report.loaded} (overwritten {report.overwritten}), skipped {report.skipped}")

"""Write every resource of the selected CRUD systems, with all revisions, to a file or stdout."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from crudgen.management.commands._systems import selected_systems


class Command(BaseCommand):
    help = "Dump crudgen resources (metadata and every revision) as JSON lines."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--system", action="append", help="dotted path of a CRUDSystem (repeatable)")
        parser.add_argument("--output", "-o", default="-", help="file to write, '-' for stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        systems = selected_systems(options["system"])
        if options["output"] == "-":
            for system in systems:
                system.dump(sys.stdout)
            return
        with open(options["output"], "w", encoding="utf-8") as stream:
            total = sum(system.dump(stream) for system in systems)
        self.stderr.write(f"dumped {total} resources to {options['output']}")

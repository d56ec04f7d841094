"""`manage.py citations_rebuild`: recount the closed slices' totals from the citation log."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from knowledge.services import citation_totals_rebuild


class Command(BaseCommand):
    help = "Recount the citation totals of the closed slices from the append-only log."

    def handle(self, *args: Any, **options: Any) -> None:
        result = citation_totals_rebuild()
        self.stdout.write(
            f"rebuilt totals of {result.events} events in closed slices (through id {result.closed_through})"
        )

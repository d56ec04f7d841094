"""`manage.py citations_check`: closed-slice totals plus the live slice must equal the full log."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from knowledge.selectors import citation_counts_check


class Command(BaseCommand):
    help = "Check that closed-slice totals plus the live slice equal the full aggregate of the citation log."

    def handle(self, *args: Any, **options: Any) -> None:
        check = citation_counts_check()
        for mismatch in check.mismatches:
            self.stderr.write(mismatch)
        if not check.ok:
            raise CommandError(f"{len(check.mismatches)} counts differ; run `manage.py citations_rebuild`.")
        self.stdout.write(
            f"ok: {check.events} events, closed slices through id {check.closed_through}, "
            f"{check.open_events} in the open slice"
        )

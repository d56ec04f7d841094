"""`manage.py worker`: the periodic job: liveness probes, idle reclaim, the disk sweep, scheduled workflows."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from knowledge.services import citation_slices_close
from workspace.services import worker_pass


class Command(BaseCommand):
    help = "Run probes, idle reclaim and the mirror sweep every --interval seconds."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--interval", type=float, default=30.0, help="Seconds between passes (default 30).")
        parser.add_argument("--once", action="store_true", help="Run one pass and exit.")
        parser.add_argument("--passes", type=int, default=0, help="Stop after this many passes (0: run until stopped).")

    def handle(self, *args: Any, **options: Any) -> None:
        limit = 1 if options["once"] else options["passes"]
        done = 0
        while True:
            report = worker_pass()
            citation_slices_close()
            done += 1
            self.stdout.write(
                f"pass {done}: probed {report.probe.probed}, refreshed {report.probe.refreshed}, "
                f"gone {report.probe.closed}, reclaimed {report.reclaim.closed}, "
                f"unknown closed {report.reconcile.closed}, measured {report.measured}, "
                f"workflows started {report.workflows.started}, not run {report.workflows.not_run}"
            )
            if limit and done >= limit:
                return
            time.sleep(max(options["interval"], 0.1))

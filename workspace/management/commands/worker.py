"""`manage.py worker`: runs the background tasks and the periodic schedule (README "Background work")."""

from __future__ import annotations

import signal
import threading
from collections import Counter
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from workspace.worker import Heartbeat, Ran, WorkerIdentity, run_forever, run_once


class Command(BaseCommand):
    help = (
        "Run background tasks (ingest, scheduled workflow runs) and, every --interval seconds, the "
        "periodic ones (probes, reclaim, reconciliation, disk sweep, schedules, citation slices)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--interval",
            type=float,
            default=settings.WORKSPACE_WORKER_INTERVAL_SECONDS,
            help="Seconds between the periodic tasks (default WORKSPACE_WORKER_INTERVAL, 30).",
        )
        parser.add_argument(
            "--once", action="store_true", help="Enqueue every periodic task, run everything due, and exit."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        worker = WorkerIdentity()
        interval = max(options["interval"], 1.0)
        stop = threading.Event()
        if options["once"]:
            heartbeat = Heartbeat(worker, stop)
            heartbeat.start()
            try:
                ran = run_once(worker, interval=interval)
            finally:
                stop.set()
            for line in ran:
                self._report(line)
            counts = Counter(line.outcome.value for line in ran)
            self.stdout.write(
                f"ran {len(ran)} tasks: {counts['succeeded']} succeeded, "
                f"{counts['retrying']} to retry, {counts['failed']} failed"
            )
            return

        def shut_down(signum: int, frame: FrameType | None) -> None:
            if stop.is_set():
                raise SystemExit(1)  # a second signal: do not wait for the task in hand
            self.stdout.write(f"worker {worker.worker_id}: stopping after the task in hand")
            stop.set()

        signal.signal(signal.SIGTERM, shut_down)
        signal.signal(signal.SIGINT, shut_down)
        self.stdout.write(f"worker {worker.worker_id}: running tasks; periodic ones every {interval:g}s")
        run_forever(worker, interval=interval, stop=stop, report=self._report)

    def _report(self, ran: Ran) -> None:
        line = f"{ran.task_name}: {ran.outcome.value}"
        self.stdout.write(f"{line} ({ran.detail})" if ran.detail else line)
        self.stdout.flush()

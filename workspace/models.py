"""The project's own rows: worker heartbeats and when each periodic task is next due."""

from __future__ import annotations

from django.db import models


class WorkerBeat(models.Model):
    """The last sign of life of one `manage.py worker` process, written from its heartbeat thread."""

    worker_id = models.CharField(max_length=64, primary_key=True)
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"worker {self.worker_id} on {self.hostname} (pid {self.pid})"


class PeriodicJob(models.Model):
    """When a periodic task is next enqueued; a worker takes a due row by compare-and-set, so several
    workers enqueue each job once per interval between them."""

    name = models.CharField(max_length=100, primary_key=True)
    due_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} due {self.due_at:%Y-%m-%d %H:%M:%S}"

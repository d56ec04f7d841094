"""The worker's per-task overhead and its orphan scan as finished task results pile up.

.venv/bin/python bench/tasks.py [--sizes 1000,10000,100000] [--database-url postgres://...]

`run one task` enqueues a no-op task, claims it and records its success (what the worker adds to
every ingest or scheduled run); `orphan scan` is the look for tasks left running by dead workers;
`periodic check` is an idle worker's poll when nothing is due. None may grow with the finished
results kept for admin.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import measure, parse_args, print_table, setup_django

BATCH = 20_000


def fill(total: int, already: int) -> None:
    """Finished results, as a week of periodic tasks and ingests leaves them."""
    from django.utils import timezone
    from django_tasks_db.models import DBTaskResult, get_date_max

    moment = timezone.now()
    rows = []
    for index in range(already, total):
        rows.append(
            DBTaskResult(
                status="SUCCESSFUL" if index % 50 else "FAILED",
                args_kwargs={"args": [], "kwargs": {}},
                task_path="workspace.tasks.disk_sweep_task",
                backend_name="default",
                run_after=get_date_max(),
                started_at=moment,
                finished_at=moment,
                worker_ids=["bench"],
                return_value={"measured": 0},
                exception_class_path="",
                traceback="",
            )
        )
        if len(rows) == BATCH:
            DBTaskResult.objects.bulk_create(rows)
            rows.clear()
    DBTaskResult.objects.bulk_create(rows)


def main() -> None:
    args = parse_args(__doc__ or "", "1000,10000,100000")
    vendor = setup_django(args.database_url, "tasks")
    from django.db import connection

    from workspace.tasks import disk_sweep_task
    from workspace.worker import WorkerIdentity, beat, claim_next, orphans_requeue, periodic_enqueue, run_claimed

    worker = WorkerIdentity(worker_id="bench")
    beat(worker)
    periodic_enqueue(interval=3600, force=True)
    while (row := claim_next(worker)) is not None:
        run_claimed(row)

    def run_one() -> None:
        disk_sweep_task.enqueue()
        row = claim_next(worker)
        assert row is not None
        run_claimed(row)

    figures = []
    filled = 0
    for size in sorted(args.sizes):
        fill(size, filled)
        filled = size
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE django_tasks_database_dbtaskresult" if vendor == "postgresql" else "ANALYZE")
        figures.append(measure("run one task (enqueue, claim, record)", size, args.repeat, run_one))
        figures.append(measure("orphan scan", size, args.repeat, lambda: orphans_requeue(worker)))
        figures.append(
            measure("periodic check, nothing due", size, args.repeat, lambda: periodic_enqueue(interval=3600))
        )
    print_table(vendor, figures)


if __name__ == "__main__":
    main()

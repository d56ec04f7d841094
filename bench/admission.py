"""Benchmark sandbox admission: the pipelined way on PostgreSQL against the general way.

Admission alone (`before_sandbox_open`: the item's lock, its live row, the gate, the new row),
without a backend, as a request runs it (a transaction of its own). The pipelined way takes two
round trips; the general way (Django's `atomic`, SQLite's only way) five, seven where a per-user
limit binds. Runs of the two alternate, so that a shared machine's slow spells weigh on both.

Run: .venv/bin/python bench/admission.py [--runs 300] [--database-url postgres://...]
Prints the median milliseconds of each way, without a limit and with a count limit. It asserts
nothing about time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import bench_var_dir, production_mode, setup_django

# Runs of each way before the timed ones (the connection and the statements' first plans).
_WARM_RUNS = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""))
    args = parser.parse_args()
    os.environ["WORKSPACE_VAR_DIR"] = str(bench_var_dir("bench-admission-"))
    os.environ.setdefault("WORKSPACE_REQUEST_LOG_LEVEL", "WARNING")
    production_mode("admission")
    vendor = setup_django(args.database_url, "admission")

    from collab.actor import Actor
    from quotas import ledger
    from quotas.services import override_set
    from quotas.values import OverrideValues
    from workspace.items import admission, services
    from workspace.items.access import app_or_404
    from workspace.items.config import get_config

    item = services.item_create(app=app_or_404("notebook"), title="bench", actor=Actor("alice"))
    app = get_config().app("notebook")
    pipelines = admission.pipelines

    def once(pipelined: bool) -> float:
        admission.pipelines = pipelines if pipelined else (lambda connection: False)
        began = time.perf_counter()
        admitted = admission.before_sandbox_open(item=item, app=app, backend="local")
        spent = (time.perf_counter() - began) * 1000
        ledger.activity_close(activity_id=admitted.activity.pk, reason="closed")
        return spent

    ways = "alternating runs of each way" if vendor == "postgresql" else "runs"
    print(f"sandbox admission on {vendor}, {args.runs} {ways}, median ms")
    for label, count in (("no limit binds", None), ("a count limit binds", 1000)):
        if count is not None:
            override_set(user_id="alice", values=OverrideValues(count=count), actor=Actor("bench", is_staff=True))
        # SQLite has only the general way: its runs are not taken twice.
        ways = (True, False) if vendor == "postgresql" else (False,)
        samples: dict[bool, list[float]] = {way: [] for way in ways}
        for round_number in range(_WARM_RUNS + args.runs):
            for way in ways:
                spent = once(way)
                if round_number >= _WARM_RUNS:
                    samples[way].append(spent)
        pipelined, general = samples.get(True, []), samples[False]
        if vendor == "postgresql":
            fast, slow = statistics.median(pipelined), statistics.median(general)
            print(f"  {label:<20} pipelined {fast:6.2f}   general {slow:6.2f}")
        else:
            print(f"  {label:<20} {statistics.median(general):6.2f} (the general way: SQLite has no pipeline)")
    admission.pipelines = pipelines


if __name__ == "__main__":
    main()

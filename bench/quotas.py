"""Benchmark the quota gates: queries and time per admission check and per file write, as the ledgers grow.

Run: .venv/bin/python bench/quotas.py [--sizes 10,1000,100000] [--repeat 200] [--database-url postgres://...]
For each size N the sandbox activity ledger and the disk ledger each hold N rows (spread over
1000 owners, most activity rows closed or expired). Figures: the admission gate and a growing
file write, for an owner with no quota and for one with every per-user limit set. Targets: a
gate is one aggregate query on an index; a write with quotas costs at most 1.2x one without.
It asserts nothing about time.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Figure, bench_var_dir, measure, parse_args, print_table, setup_django

OWNERS = 1000
PAYER, FREE = "alice", "bob"  # with every per-user limit / with none
FILE_BYTES = 4096
WORKSPACE_FILES = 50


def _populate(size: int) -> None:
    """N activity rows (a tenth live, the rest closed or expired) and N disk rows; the payer has some of each."""
    from collab import clock
    from quotas.models import SandboxActivity, WorkspaceDiskUsage

    SandboxActivity.objects.all().delete()
    WorkspaceDiskUsage.objects.all().delete()
    now = clock.now()
    activity, disk = [], []
    for n in range(size):
        owner = PAYER if n % OWNERS == 0 else f"user{n % OWNERS}"
        live = n % 10 == 0
        activity.append(
            SandboxActivity(
                item_id=f"b{n}",
                app_slug="notebook",
                owner=owner,
                backend="local",
                cpu_cores=0.001,
                memory_bytes=1024,
                charges_cost=True,
                lease_expires_at=now + timedelta(minutes=5) if live else now - timedelta(minutes=5),
                is_deleted=not live and n % 3 == 0,
            )
        )
        disk.append(WorkspaceDiskUsage(item_id=f"b{n}", app_slug="notebook", owner=owner, bytes=1000))
    SandboxActivity.objects.bulk_create(activity, batch_size=5000)
    WorkspaceDiskUsage.objects.bulk_create(disk, batch_size=5000)


def _gate(owner: str):
    from django.db import transaction

    from quotas.services import sandbox_admit
    from quotas.values import SandboxSize

    incoming = SandboxSize(cpu_cores=1.0, memory_bytes=512 * 1024**2)

    def run() -> None:
        with transaction.atomic():
            sandbox_admit(payer=owner, incoming=incoming)

    return run


def _file_write(owner: str):
    """Delete then re-write one file, so every write grows the workspace and meets the checks."""
    from collab.actor import Actor
    from workspace.items import services
    from workspace.items.access import app_or_404
    from workspace.items.workspaces import item_workspace_ref
    from workspace.sandboxes.filestore import delete_path, write_file

    item = services.item_create(app=app_or_404("notebook"), title=f"bench {owner}", payer=owner, actor=Actor(owner))
    ref = item_workspace_ref(item)
    for n in range(WORKSPACE_FILES):
        write_file(ref, f"existing/{n}.txt", [b"x" * 1000])
    payload = os.urandom(FILE_BYTES)

    def run() -> None:
        if (ref.root / "bench.bin").exists():
            delete_path(ref, "bench.bin")
        write_file(ref, "bench.bin", [payload])

    return run


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], "10,1000,100000")
    os.environ["WORKSPACE_VAR_DIR"] = str(bench_var_dir("bench-quotas-"))
    vendor = setup_django(args.database_url, "quotas")

    from collab.actor import Actor
    from quotas import services
    from quotas.values import OverrideValues

    services.override_set(
        user_id=PAYER,
        values=OverrideValues(count=10**6, cpu=10.0**6, memory=2**50, disk=2**50),
        actor=Actor("bench", is_staff=True),
    )
    write_free, write_payer = _file_write(FREE), _file_write(PAYER)
    figures: list[Figure] = []
    for size in args.sizes:
        _populate(size)
        figures.append(measure("gate, no quota", size, args.repeat, _gate(FREE)))
        figures.append(measure("gate, with quotas", size, args.repeat, _gate(PAYER)))
        figures.append(measure("file write, no quota", size, args.repeat, write_free))
        figures.append(measure("file write, with quotas", size, args.repeat, write_payer))
    print_table(vendor, figures)
    print("\nfile write with quotas / without (time):")
    for size in args.sizes:
        pair = [f for f in figures if f.size == size and f.label.startswith("file write")]
        print(f"  {size:>9,}: {pair[1].server_ms / pair[0].server_ms:.2f}x")


if __name__ == "__main__":
    main()

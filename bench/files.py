"""Benchmark the file store: single-file writes per second and queries per write.

Run: .venv/bin/python bench/files.py [--writes 200] [--sizes 1024,65536,1048576]
Uses a throwaway SQLite database and a temp workspace directory (or --database-url, disposable).
Prints writes per second through the HTTP API (PUT .../files/<path>) and straight through the
file store, with the queries each write costs. It asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import bench_var_dir, setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--sizes", default="1024,65536,1048576")
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""))
    args = parser.parse_args()
    os.environ["WORKSPACE_VAR_DIR"] = str(bench_var_dir("bench-files-"))
    vendor = setup_django(args.database_url, "files")

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from collab.actor import Actor
    from workspace.items import services
    from workspace.items.access import app_or_404

    item = services.item_create(app=app_or_404("notebook"), title="bench", actor=Actor("alice"))
    client = APIClient()
    client.credentials(HTTP_X_USER_ID="alice")
    url = f"/a/notebook/items/{item.pk}/files"

    print(f"file writes on {vendor}, {args.writes} writes per row (fsync on every write)")
    print(f"{'path':<12} {'size':>9} {'writes/s':>10} {'ms/write':>9} {'queries/write':>14}")
    for size in [int(s) for s in args.sizes.split(",") if s]:
        payload = os.urandom(size)
        for label, write in (
            (
                "HTTP PUT",
                lambda n, p=payload: client.put(f"{url}/f{n % 20}.bin", p, content_type="application/octet-stream"),
            ),
            ("file store", lambda n, p=payload: services.file_write(item=item, path=f"g{n % 20}.bin", chunks=[p])),
        ):
            with CaptureQueriesContext(connection) as queries:
                began = time.perf_counter()
                for n in range(args.writes):
                    write(n)
                elapsed = time.perf_counter() - began
            print(
                f"{label:<12} {size:>9} {args.writes / elapsed:>10.0f} {elapsed / args.writes * 1000:>9.2f} "
                f"{len(queries) / args.writes:>14.2f}"
            )


if __name__ == "__main__":
    main()

"""Benchmark crudgen's generated routes against a plain DRF ModelViewSet on the same kind of table.

Run: .venv/bin/python bench/crudgen.py [--sizes 1000,10000,100000] [--requests 200]
Uses a throwaway SQLite database unless --database-url names another (it must be disposable).
Prints requests per second and queries per request for create, get, patch and a list page (page_size 20),
plus get after 1 and after 500 revisions, and a page and a count filtered on a data field that 50 rows
match at every size: indexed (`indexed_fields`, flat as the table grows) and not indexed (a scan).
Requests per second come from the median request time. --only runs some operations (by prefix).
It asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import types
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@dataclass
class Figure:
    per_second: float
    queries: float
    cpu_ms: float  # median CPU time of this process per request (SQLite's work included, a server's not)


def _setup(database_url: str | None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workspace.settings")
    os.environ["DATABASE_URL"] = database_url or f"sqlite:///{tempfile.mkdtemp(prefix='crudgen-bench-')}/bench.db"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _plain_urls() -> list[Any]:
    """A plain ModelViewSet over the same resource table (namespace `plain`), without revisions."""
    from rest_framework import pagination, routers, serializers, viewsets

    from crudgen.models import StoredResource

    class PlainSerializer(serializers.ModelSerializer):
        class Meta:
            model = StoredResource
            fields = ["resource_id", "data", "created_time", "updated_time", "created_by", "updated_by"]
            read_only_fields = ["resource_id", "created_time", "updated_time", "created_by", "updated_by"]

    class PlainPagination(pagination.PageNumberPagination):
        page_size = 20

    class PlainViewSet(viewsets.ModelViewSet):
        serializer_class = PlainSerializer
        pagination_class = PlainPagination
        lookup_field = "resource_id"

        def get_queryset(self) -> Any:
            return StoredResource.objects.filter(namespace="plain", is_deleted=False).order_by(
                "-created_time", "-resource_id"
            )

        def perform_create(self, serializer: Any) -> None:
            now = datetime.now(UTC)
            rid = str(uuid.uuid4())
            serializer.save(
                namespace="plain",
                resource_id=rid,
                current_revision_id=f"{rid}:1",
                created_time=now,
                updated_time=now,
                created_by="alice",
                updated_by="alice",
            )

    router = routers.SimpleRouter(trailing_slash=False)
    router.register("plain", PlainViewSet, basename="plain")
    return router.urls


RARE = 7  # the filtered value: 50 rows hold it whatever the size, the others 0..4


def _rare_value(index: int, count: int) -> int:
    return RARE if index % max(1, count // 50) == 0 else index % 5


def _seed(namespace: str, count: int, revisions_each: int = 1) -> list[str]:
    from crudgen.models import StoredResource, StoredRevision

    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = [str(uuid.uuid4()) for _ in range(count)]
    rows = [
        StoredResource(
            namespace=namespace,
            resource_id=rid,
            current_revision_id=f"{rid}:{revisions_each}",
            is_deleted=False,
            created_time=start + timedelta(seconds=i),
            updated_time=start + timedelta(seconds=i),
            created_by="alice",
            updated_by="alice",
            revision_count=revisions_each,
            data={"name": f"w{i}", "steps": ["make"], "priority": _rare_value(i, count), "rank": _rare_value(i, count)},
        )
        for i, rid in enumerate(ids)
    ]
    StoredResource.objects.bulk_create(rows, batch_size=2000)
    if namespace != "plain":
        by_id = dict(StoredResource.objects.filter(namespace=namespace).values_list("resource_id", "pk"))
        revisions = [
            StoredRevision(
                resource_id=by_id[rid],
                revision_id=f"{rid}:{n}",
                parent_revision_id=f"{rid}:{n - 1}" if n > 1 else None,
                number=n,
                data={"name": "w", "steps": ["make"], "priority": 0, "rank": 0},
                created_time=start,
                created_by="alice",
            )
            for rid in ids
            for n in range(1, revisions_each + 1)
        ]
        StoredRevision.objects.bulk_create(revisions, batch_size=2000)
    # The rows went in around the storage, so its namespace tally is rebuilt from them.
    from crudgen import DjangoStorage

    DjangoStorage(namespace=namespace).recount()
    return ids


def _measure(requests: int, call: Callable[[int], Any]) -> Figure:
    """Requests per second from the median request time: on a shared machine the median shrugs
    off the bursts another process's work puts into a total."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    call(0)  # warm caches and URL resolvers outside the timing
    durations, cpu = [], []
    with CaptureQueriesContext(connection) as captured:
        for index in range(requests):
            started, cpu_started = time.perf_counter(), time.thread_time()
            response = call(index)
            durations.append(time.perf_counter() - started)
            cpu.append(time.thread_time() - cpu_started)
            if response.status_code >= 400:
                raise RuntimeError(f"benchmark request failed: {response.status_code} {response.content[:200]!r}")
    return Figure(1 / statistics.median(durations), len(captured) / requests, statistics.median(cpu) * 1000)


Call = Callable[[int], Any]


def _run_size(size: int, requests: int, client: Any, only: list[str]) -> dict[str, tuple[Figure, Figure | None]]:
    from crudgen.models import StoredResource

    StoredResource.objects.all().delete()
    crud_ids = _seed("workflow", size)
    plain_ids = _seed("plain", size)
    deep_id = _seed("workflow", 1, revisions_each=500)[0]
    body = {"name": "bench", "steps": ["make"]}
    pick = random.Random(size)
    middle_page = max(1, size // 40)

    def crud_patch(i: int) -> Any:
        ops = [{"op": "replace", "path": "/name", "value": f"n{i}"}]
        return client.patch(f"/c/workflow/{pick.choice(crud_ids)}", ops, format="json")

    def plain_patch(i: int) -> Any:
        return client.patch(
            f"/p/plain/{pick.choice(plain_ids)}", {"data": {"name": f"n{i}", "steps": []}}, format="json"
        )

    # (operation, crudgen call, plain DRF call or None); offset pagination: a middle page costs an
    # index walk to its offset for both sides alike; 50 rows match the filters at every size.
    cells: list[tuple[str, Call, Call | None]] = [
        (
            "create",
            lambda i: client.post("/c/workflow", body, format="json"),
            lambda i: client.post("/p/plain", {"data": body}, format="json"),
        ),
        (
            "get",
            lambda i: client.get(f"/c/workflow/{pick.choice(crud_ids)}/data"),
            lambda i: client.get(f"/p/plain/{pick.choice(plain_ids)}"),
        ),
        ("get after 500 revisions", lambda i: client.get(f"/c/workflow/{deep_id}/data"), None),
        ("patch", crud_patch, plain_patch),
        (
            "list first page (20)",
            lambda i: client.get("/c/workflow/data?page=1&page_size=20"),
            lambda i: client.get("/p/plain?page=1"),
        ),
        (
            f"list page {middle_page} (20)",
            lambda i: client.get(f"/c/workflow/data?page={middle_page}&page_size=20"),
            lambda i: client.get(f"/p/plain?page={middle_page}"),
        ),
        ("list filtered, indexed", lambda i: client.get(f"/c/workflow/data?priority={RARE}&page_size=20"), None),
        ("count filtered, indexed", lambda i: client.get(f"/c/workflow/count?priority={RARE}"), None),
        ("list filtered, no index", lambda i: client.get(f"/c/workflow/data?rank={RARE}&page_size=20"), None),
    ]
    return {
        operation: (_measure(requests, crud), _measure(requests, plain) if plain else None)
        for operation, crud, plain in cells
        if not only or operation.startswith(tuple(only))
    }


def _page_buffers(size: int, crud: Any) -> list[str]:
    """PostgreSQL's own count of the pages a filtered first page touches (EXPLAIN ANALYZE BUFFERS):
    what the database did, however busy the machine was."""
    from django.db import connection

    from crudgen import DataFilter, ListQueryParams

    lines = []
    for label, field in (("list filtered, indexed", "priority"), ("list filtered, no index", "rank")):
        params = crud._effective(ListQueryParams(data_filters=(DataFilter(field, "exact", RARE),)))
        page = crud.storage._filtered(params, False, None).order_by(*crud.storage._ordering(params))[:20]
        sql, sql_params = page.query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", sql_params)
            plan = cursor.fetchone()[0][0]["Plan"]
        touched = plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)
        lines.append(f"{size:>8}  {label:<26}  buffers {touched} (8 kB pages the page query touched)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--only", default="", help="comma-separated operation prefixes, e.g. 'list filtered,count'")
    args = parser.parse_args()
    _setup(args.database_url)

    from django.conf import settings
    from django.db import connection
    from django.urls import clear_url_caches, include, path
    from rest_framework.test import APIClient

    from crudgen import CRUDSystem, DjangoStorage, MetadataConfig

    @dataclass
    class Workflow:
        name: str
        steps: list[str]
        priority: int = 0
        rank: int = 0

    crud_system = CRUDSystem(
        storage_factory=DjangoStorage, metadata_config=MetadataConfig.with_full_tracking(), use_plural=False
    )
    crud_system.register_model(Workflow, indexed_fields=("priority",))
    crud_system.ensure_indexes()
    urls = types.ModuleType("crudgen_bench_urls")
    urls.urlpatterns = [path("c/", include(crud_system.create_router(""))), path("p/", include(_plain_urls()))]
    settings.ROOT_URLCONF = urls
    clear_url_caches()
    client = APIClient()

    print(f"database: {settings.DATABASES['default']['ENGINE']}, {args.requests} requests per cell")
    print(f"{'N':>8}  {'operation':<26}{'crudgen/s':>11}{'q/req':>7}{'plain/s':>11}{'q/req':>7}{'ratio':>7}")
    cpu_lines = []
    for size in [int(s) for s in args.sizes.split(",") if s]:
        results = _run_size(size, args.requests, client, [o for o in args.only.split(",") if o])
        for operation, (crud, plain) in results.items():
            plain_cells = f"{plain.per_second:>11.0f}{plain.queries:>7.1f}" if plain else f"{'-':>11}{'-':>7}"
            ratio = f"{plain.per_second / crud.per_second:>7.2f}" if plain else f"{'-':>7}"
            print(f"{size:>8}  {operation:<26}{crud.per_second:>11.0f}{crud.queries:>7.1f}{plain_cells}{ratio}")
            plain_cpu = f"{plain.cpu_ms:.2f}" if plain else "-"
            cpu_lines.append(f"{size:>8}  {operation:<26}  cpu {crud.cpu_ms:.2f} ms (plain {plain_cpu})")
        if connection.vendor == "postgresql" and any(operation.startswith("list filtered") for operation in results):
            cpu_lines += _page_buffers(size, crud_system.get_crud(Workflow))
    # CPU time does not wait for other processes, so it stays comparable on a busy machine.
    print("\nmedian CPU time of this process per request (with SQLite: the database's work too)")
    print("\n".join(cpu_lines))


if __name__ == "__main__":
    main()

"""Shared plumbing of the benchmarks: a throwaway database, query timing, a printed table."""

from __future__ import annotations

import argparse
import atexit
import functools
import inspect
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def bench_var_dir(prefix: str) -> Path:
    """A throwaway var directory sandbox uids may pass through (bubblewrap reaches workspaces by
    path); at exit its sandboxes are closed and its workspace images unmounted."""
    var_dir = Path(tempfile.mkdtemp(prefix=prefix))
    var_dir.chmod(0o711)
    atexit.register(_release)
    return var_dir


def _release() -> None:
    from workspace.sandboxes.registry import local_sandboxes_release

    local_sandboxes_release()


def parse_args(description: str, default_sizes: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sizes", default=default_sizes, help="comma-separated sizes, e.g. 1000,100000")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", ""),
        help="postgres://... for PostgreSQL; empty for a throwaway SQLite file",
    )
    parser.add_argument("--repeat", type=int, default=200, help="timed repetitions per figure")
    args = parser.parse_args()
    args.sizes = [int(size) for size in args.sizes.split(",") if size]
    return args


def production_mode(name: str) -> None:
    """Django as deployed (DEBUG off: no debug cursor around each query), the bench's requests
    still naming their user with the mock identity's header."""
    os.environ["DJANGO_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SECRET_KEY", f"bench-{name}-not-a-secret")
    os.environ["WORKSPACE_ALLOW_MOCK_IDENTITY"] = "1"


def setup_django(database_url: str, name: str) -> str:
    """Points Django at a fresh database (a temp SQLite file, or `bench_<name>` on PostgreSQL)."""
    sys.path.insert(0, str(REPO))
    if database_url:
        base, _, _ = database_url.rpartition("/")
        database = f"bench_{name}"
        import psycopg

        with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}"')
            admin.execute(f'CREATE DATABASE "{database}"')
        os.environ["DATABASE_URL"] = f"{base}/{database}"
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp(prefix='bench-')}/bench.sqlite3"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workspace.settings")
    os.environ.setdefault("WORKSPACE_LOG_LEVEL", "WARNING")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from django.db import connection

    return connection.vendor


@dataclass
class QueryTimer:
    """Counts queries and the time spent inside the database driver."""

    count: int = 0
    seconds: float = 0.0
    statements: list[str] = field(default_factory=list)

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - began
            self.count += 1
            self.statements.append(sql)


@contextmanager
def timed_queries() -> Iterator[QueryTimer]:
    from django.db import connection

    timer = QueryTimer()
    with connection.execute_wrapper(timer):
        yield timer


@dataclass(frozen=True)
class Figure:
    label: str
    size: int
    server_ms: float
    db_ms: float
    queries: float


def measure(label: str, size: int, repeat: int, action: Callable[[], Any]) -> Figure:
    """Median-free mean over `repeat` runs after one warm-up run."""
    action()
    with timed_queries() as timer:
        began = time.perf_counter()
        for _ in range(repeat):
            action()
        elapsed = time.perf_counter() - began
    return Figure(label, size, elapsed / repeat * 1000, timer.seconds / repeat * 1000, timer.count / repeat)


def print_table(vendor: str, figures: list[Figure]) -> None:
    print(f"\n{vendor}")
    print(f"| {'figure':<38} | {'size':>9} | {'server ms':>9} | {'db ms':>7} | {'queries':>7} |")
    print(f"|{'-' * 40}|{'-' * 11}|{'-' * 11}|{'-' * 9}|{'-' * 9}|")
    for f in figures:
        print(f"| {f.label:<38} | {f.size:>9,} | {f.server_ms:>9.3f} | {f.db_ms:>7.3f} | {f.queries:>7.1f} |")


class StepTimer:
    """While entered, each of `targets` ((owner, attribute name, label)) is replaced by a version
    that records its wall time under its label in `spent` (ms). A generator (a step that may wait,
    collab.waits) is timed from its first step to its end. `seen(name, result)` is called with what
    a plain function returned, for a subclass that counts something of it."""

    def __init__(self, targets: list[tuple[object, str, str]]) -> None:
        self.targets = targets
        self.saved: list[tuple[object, str, object]] = []
        self.reset()

    def reset(self) -> None:
        self.spent: dict[str, list[float]] = {label: [] for _, _, label in self.targets}

    def __enter__(self) -> StepTimer:
        for owner, name, label in self.targets:
            original = getattr(owner, name)
            self.saved.append((owner, name, original))
            setattr(owner, name, self._timed(original, label))
        return self

    def __exit__(self, *exc_info: object) -> None:
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)
        self.saved.clear()

    def seen(self, name: str, result: object) -> None:
        """What a timed plain function returned; nothing by default."""

    def _timed(self, original: Any, label: str) -> Any:
        if inspect.isgeneratorfunction(original):

            @functools.wraps(original)
            def timed_steps(*args: Any, **kwargs: Any) -> Any:
                began = time.perf_counter()
                try:
                    return (yield from original(*args, **kwargs))
                finally:
                    self.spent[label].append((time.perf_counter() - began) * 1000)

            return timed_steps

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                result = original(*args, **kwargs)
            finally:
                self.spent[label].append((time.perf_counter() - began) * 1000)
            self.seen(original.__name__, result)
            return result

        return timed

"""One report: every bench/ script on SQLite and on PostgreSQL, gathered into bench/REPORT.md.

Run: .venv/bin/python bench/report.py [--quick | --big] [--database-url postgres://postgres@127.0.0.1:5432/postgres]
     (or `make bench`, `make bench QUICK=1`, `make bench BIG=1`)
Each script runs in its own process at its documented sizes (--quick: small sizes, for a fast
check; --big: the largest sizes too, where a script has them: citations at 10^7 events, which
adds some 15 minutes and needs 5 GB of disk on SQLite, 8 GB on PostgreSQL), once on a throwaway
SQLite file and once on a throwaway PostgreSQL database; its output is kept in
bench/results/<script>-<backend>.txt (git-ignored) and its figures are parsed into one Markdown
table: figure, size, SQLite, PostgreSQL, each figure's sizes together so its curve reads down the
table. The sections written by hand below the table (what a change measured, and why) are kept.
It asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.live import DEFAULT_SERVER_URL, postgres_reachable, throwaway_database

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
REPORT = BENCH / "REPORT.md"
Row = tuple[str, str, str]  # figure, size, value


@dataclass(frozen=True)
class Script:
    name: str
    full: list[str]
    quick: list[str]
    parse: Callable[[str], list[Row]]
    own_database: bool = False  # takes --database-url as the database to fill (it must be disposable)
    setup_name: str = ""  # bench.common.setup_django's `bench_<name>` database, dropped afterwards
    big: list[str] | None = None  # the arguments of --big, when they differ from `full`


def _table_rows(prefix: str, unit: str = "ms") -> Callable[[str], list[Row]]:
    """bench.common.print_table: | figure | size | server ms | db ms | queries |"""

    def parse(text: str) -> list[Row]:
        rows = []
        for match in re.finditer(
            r"^\| (.+?)\s+\|\s+([\d,]+) \|\s+([\d.]+) \|\s+([\d.]+) \|\s+([\d.]+) \|$", text, re.M
        ):
            label, size, server, _db, queries = match.groups()
            rows.append((f"{prefix}: {label}", size, f"{float(server):.2f} {unit}, {float(queries):g} q"))
        return rows

    return parse


def _citations(text: str) -> list[Row]:
    """bench/citations.py: | events | figure | queries | median ms | fastest ms | slowest ms | note |,
    the database size after each size, and the final check."""
    rows = []
    size = ""
    for line in text.splitlines():
        figure = re.match(r"^\s*([\d,]+)  (.+?)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)  (.*)$", line)
        database = re.match(r"^\s+\(database: ([\d,]+ MB)\)$", line)
        check = re.match(r"^check: (.+)$", line)
        if figure:
            size, name, queries, median, fastest, slowest, _note = figure.groups()
            value = f"{float(median):.2f} ms (fastest {float(fastest):.2f}, slowest {float(slowest):.1f}), {queries} q"
            rows.append((f"citations: {name}", f"{size} events", value))
        elif database and size:
            rows.append(("citations: database size", f"{size} events", database.group(1)))
        elif check and size:
            rows.append(("citations: check over the whole log", f"{size} events", check.group(1)))
    return rows


def _crudgen(text: str) -> list[Row]:
    rows = []
    pattern = r"^\s*(\d+)  (.{26})\s*(\d+)\s+([\d.]+)\s+(\S+)\s+(\S+)\s+(\S+)$"
    for match in re.finditer(pattern, text, re.M):
        size, operation, crud, queries, plain, _plain_q, _ratio = match.groups()
        versus = f" (plain DRF {plain}/s)" if plain != "-" else ""
        rows.append(
            (f"crudgen: {operation.strip()}", f"{int(size):,} rows", f"{crud} req/s, {float(queries):g} q{versus}")
        )
    return rows


def _crudgen_http(text: str) -> list[Row]:
    """bench/crudgen_http.py: | operation | size | p50 ms | p90 ms | /create | statements | crudgen |"""
    rows = []
    number = r"\s+([\d.]+) \|"
    pattern = rf"^\| (\w[\w ,]*?)\s+\|\s+([\d,]+) \|{number * 5}$"
    for match in re.finditer(pattern, text, re.M):
        operation, size, p50, p90, _ratio, statements, crudgen = match.groups()
        rows.append(
            (
                f"crudgen over HTTP: {operation}",
                f"{size} rows",
                f"{float(p50):.2f} ms (p90 {float(p90):.2f}), {float(statements):g} q ({float(crudgen):g} crudgen)",
            )
        )
    return rows


def _files(text: str) -> list[Row]:
    rows = []
    for match in re.finditer(r"^(HTTP PUT|file store)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)$", text, re.M):
        label, size, per_second, ms, queries = match.groups()
        rows.append((f"file write: {label}", f"{int(size):,} B", f"{per_second}/s ({ms} ms), {float(queries):g} q"))
    return rows


def _exec(text: str) -> list[Row]:
    runs = re.search(r"(\d+) runs", text)
    size = f"{runs.group(1)} runs" if runs else ""
    rows = []
    number = r"\s+([\d.]+)"
    for match in re.finditer(rf"^(live sandbox|live, nsenter|opens one|bwrap directly){number * 5}$", text, re.M):
        label, median, p90, least, queries, db_ms = match.groups()
        size = f"{runs.group(1)} runs" if runs else ""
        spent = f"{median} ms (p90 {p90}, min {least})"
        rows.append(
            (
                f"exec round trip: {label}",
                size,
                spent + (f", {float(queries):g} q, db {db_ms} ms" if label != "bwrap directly" else ""),
            )
        )
    ratio = re.search(r"^live / bwrap directly: (.+)$", text, re.M)
    if ratio:
        rows.append(("exec round trip: live sandbox / bwrap directly", size, ratio.group(1)))
    return rows


def _admission(text: str) -> list[Row]:
    """bench/admission.py: per case, the pipelined and the general way (PostgreSQL) or the general way alone."""
    runs = re.search(r"(\d+) (?:alternating )?runs", text)
    size = f"{runs.group(1)} runs" if runs else ""
    rows = []
    for match in re.finditer(r"^  (no limit binds|a count limit binds)\s+(.+)$", text, re.M):
        label, figures = match.groups()
        both = re.match(r"pipelined\s+([\d.]+)\s+general\s+([\d.]+)", figures)
        value = f"{both.group(1)} ms (the general way {both.group(2)} ms)" if both else f"{figures.split()[0]} ms"
        rows.append((f"sandbox admission: {label}", size, value))
    return rows


def _service_vs_crudgen(text: str) -> list[Row]:
    """bench/service_vs_crudgen.py: | operation | size | alone p50 ms | service p50 ms | ratio |"""
    rows = []
    for match in re.finditer(r"^\| (\w+)\s+\|\s+([\d,]+) \|\s+([\d.]+) \|\s+([\d.]+) \|\s+([\d.]+) \|$", text, re.M):
        operation, size, alone, service, ratio = match.groups()
        value = f"{float(service):.2f} ms vs {float(alone):.2f} ms alone ({float(ratio):.2f}x)"
        rows.append((f"the service vs crudgen alone (p50): {operation}", f"{size} rows", value))
    return rows


def _request_profile(text: str) -> list[Row]:
    """bench/request_profile.py: per kind of request, its total and its parts (middleware summed)."""
    notifications = re.search(r"([\d,]+) notifications", text)
    size = f"{notifications.group(1)} notifications" if notifications else ""
    rows = []
    for section in re.split(r"\n(?=\S[^|\n]*: total )", text):
        head = re.match(r"^(\S[^|\n]*): total ([\d.]+) ms, ([\d.]+) q", section)
        if not head:
            continue
        kind, total, queries = head.groups()
        parts = {name.strip(): float(ms) for name, ms in re.findall(r"^\| ([^|]+?)\s+\|\s+([\d.]+) \|$", section, re.M)}
        middleware = sum(ms for name, ms in parts.items() if name.startswith("middleware "))
        auth = sum(ms for name, ms in parts.items() if name.startswith("auth"))

        def part(prefix: str, parts: dict[str, float] = parts) -> float:
            return sum(ms for name, ms in parts.items() if name.startswith(prefix))

        value = (
            f"{float(total):.2f} ms, {float(queries):g} q: view {part('view'):.2f}, db {part('db'):.2f}, "
            f"auth {auth:.2f}, middleware {middleware:.2f}, access policy {part('access policy'):.2f}, "
            f"connection {part('connection'):.2f}"
        )
        rows.append((f"request profile: {kind}", size, value))
    return rows


def _retrieval(text: str) -> list[Row]:
    """bench/retrieval.py: retrieval quality, answers through the chat API, the demo's questions."""
    rows = []
    number = r"\s+([\d.]+) \|"
    for match in re.finditer(
        rf"^\| (lexical|dense[^|]*?|hybrid[^|]*?)\s+\|\s+([\d,]+) \|{number}{number}$", text, re.M
    ):
        name, questions, ndcg, recall = match.groups()
        rows.append((f"retrieval: {name}", f"{questions} questions", f"nDCG@10 {ndcg}, recall@10 {recall}"))
    for match in re.finditer(rf"^\| (lexical|hybrid)\s+\|\s+([\d,]+) \|{number}{number}\s+(\d+) \|", text, re.M):
        mode, questions, holds, markers, _none = match.groups()
        value = f"[1] holds an answer {holds}, {markers} markers per answer"
        rows.append((f"answers through the chat API: {mode}", f"{questions} questions", value))
    for match in re.finditer(
        r"^\| demo questions, (\w+)\s+\|\s+(\d+) \| markers (\d+) \| off-topic (\d+) \|$", text, re.M
    ):
        mode, questions, markers, off_topic = match.groups()
        rows.append((f"demo questions: {mode}", f"{questions} questions", f"{markers} markers, {off_topic} off-topic"))
    return rows


SCRIPTS = [
    Script(
        "notifications",
        ["--sizes", "1000,100000,1000000"],
        ["--sizes", "1000,10000", "--repeat", "50"],
        _table_rows("notifications"),
        setup_name="notifications",
    ),
    Script(
        "citations",
        ["--sizes", "100000,1000000"],
        ["--sizes", "10000,100000"],
        _citations,
        big=["--sizes", "100000,1000000,10000000"],
    ),
    Script(
        "crudgen",
        ["--sizes", "1000,10000,100000"],
        ["--sizes", "1000", "--requests", "50"],
        _crudgen,
        own_database=True,
    ),
    Script(
        "crudgen_http",
        ["--sizes", "1000,10000"],
        ["--sizes", "1000", "--requests", "50"],
        _crudgen_http,
        own_database=True,
    ),
    Script(
        "service_vs_crudgen",
        ["--sizes", "1000,10000", "--requests", "100"],
        ["--sizes", "1000", "--requests", "30"],
        _service_vs_crudgen,
    ),
    Script(
        "request_profile",
        ["--notifications", "1000000"],
        ["--notifications", "10000", "--repeat", "50"],
        _request_profile,
        setup_name="profile",
    ),
    Script("files", [], ["--writes", "50", "--sizes", "1024,65536"], _files, setup_name="files"),
    Script("exec", [], ["--runs", "10"], _exec, setup_name="exec"),
    Script("admission", [], ["--runs", "30"], _admission, setup_name="admission"),
    Script(
        "tasks",
        ["--sizes", "1000,10000,100000"],
        ["--sizes", "1000,10000", "--repeat", "50"],
        _table_rows("tasks"),
        setup_name="tasks",
    ),
    Script(
        "workflow_pages",
        ["--sizes", "1000,10000,100000"],
        ["--sizes", "1000,10000", "--repeat", "20"],
        _table_rows("workflow pages"),
        setup_name="workflow_pages",
    ),
    Script(
        "quotas",
        ["--sizes", "10,1000,100000"],
        ["--sizes", "10,1000", "--repeat", "50"],
        _table_rows("quota gates"),
        setup_name="quotas",
    ),
    Script(
        "knowledge_pages",
        ["--sizes", "1000,10000,100000"],
        ["--sizes", "1000", "--repeat", "10"],
        _table_rows("knowledge base"),
        setup_name="knowledge_pages",
    ),
    Script(
        "hybrid_search",
        ["--sizes", "1000,10000,100000", "--repeat", "30"],
        ["--sizes", "1000,10000", "--repeat", "10"],
        _table_rows("question retrieval"),
        setup_name="hybrid_search",
    ),
    Script("retrieval", [], ["--questions", "100"], _retrieval, setup_name="retrieval"),
]


def _run(script: Script, args: list[str], database_url: str, backend: str) -> tuple[str, float]:
    command = [sys.executable, str(BENCH / f"{script.name}.py"), *args]
    if database_url:
        command += ["--database-url", database_url]
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "BENCH_DATABASE_URL"}}
    env["WORKSPACE_LOG_LEVEL"] = "WARNING"
    print(f"  {backend:<10} {' '.join(command[1:])}", flush=True)
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=BENCH.parent, check=False)
    seconds = time.perf_counter() - began
    output = done.stdout + (f"\n[exit {done.returncode}]\n{done.stderr}" if done.returncode else "")
    (RESULTS / f"{script.name}-{backend}.txt").write_text(output)
    if done.returncode:
        print(f"  {script.name} on {backend} failed (exit {done.returncode}); see bench/results/", file=sys.stderr)
    return done.stdout, seconds


def _drop(server_url: str, name: str) -> None:
    import psycopg

    from bench.live import _admin_url

    with psycopg.connect(_admin_url(server_url), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _postgres_run(script: Script, args: list[str], server_url: str) -> tuple[str, float]:
    if script.own_database:
        with throwaway_database(server_url, prefix=f"bench_{script.name}") as url:
            return _run(script, args, url, "postgresql")
    try:
        return _run(script, args, server_url, "postgresql")
    finally:
        if script.setup_name:
            _drop(server_url, f"bench_{script.setup_name}")


def _previous_report() -> tuple[list[tuple[str, str]], dict[tuple[str, str], dict[str, str]]]:
    """The figures of bench/REPORT.md as written last, in its order."""
    order: list[tuple[str, str]] = []
    table: dict[tuple[str, str], dict[str, str]] = {}
    if not REPORT.exists():
        return order, table
    text = REPORT.read_text()
    notes = text.find("\n## ")
    # The table ends where the sections written by hand begin; their own tables are not its rows.
    for line in (text if notes < 0 else text[:notes]).splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("figure", "---") or not line.startswith("| "):
            continue
        figure, size, sqlite, postgresql = cells
        order.append((figure, size))
        table[(figure, size)] = {k: v for k, v in (("sqlite", sqlite), ("postgresql", postgresql)) if v != "-"}
    return order, table


def _notes_of_previous_report() -> str:
    """The sections written by hand below the table (each headed `## `: what a change measured
    and why), kept as they were: a new table does not undo what they say happened."""
    if not REPORT.exists():
        return ""
    text = REPORT.read_text()
    start = text.find("\n## ")
    return "" if start < 0 else text[start + 1 :]


def _drop_stale(
    script: Script,
    runs: dict[str, tuple[str, float]],
    table: dict[tuple[str, str], dict[str, str]],
    order: list[tuple[str, str]],
) -> None:
    """After a partial run: the last report's rows of this script's figures that it no longer gives go."""
    fresh = {(figure, size) for output, _ in runs.values() for figure, size, _ in script.parse(output)}
    prefixes = {figure.split(":", 1)[0] for figure, _ in fresh}
    for key in [key for key in order if key[0].split(":", 1)[0] in prefixes and key not in fresh]:
        order.remove(key)
        del table[key]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size_choice = parser.add_mutually_exclusive_group()
    size_choice.add_argument("--quick", action="store_true", help="small sizes, for a fast check")
    size_choice.add_argument("--big", action="store_true", help="the largest sizes too (citations at 10^7 events)")
    parser.add_argument("--database-url", default=DEFAULT_SERVER_URL, help="a PostgreSQL server (any database on it)")
    parser.add_argument("--only", default="", help="comma-separated script names (default: all)")
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    wanted = [s for s in SCRIPTS if not args.only or s.name in args.only.split(",")]
    have_postgres = postgres_reachable(args.database_url)
    if not have_postgres:
        print(f"no PostgreSQL at {args.database_url}: its column stays empty", file=sys.stderr)
    table: dict[tuple[str, str], dict[str, str]] = {}
    order: list[tuple[str, str]] = []
    if args.only:
        # A partial run keeps the other scripts' figures of the last report.
        order, table = _previous_report()
    durations: list[str] = []
    began = time.perf_counter()
    for script in wanted:
        script_args = script.quick if args.quick else (script.big or script.full) if args.big else script.full
        print(f"{script.name}:", flush=True)
        runs = {"sqlite": _run(script, script_args, "", "sqlite")}
        if have_postgres:
            runs["postgresql"] = _postgres_run(script, script_args, args.database_url)
        durations.append(
            f"{script.name} "
            + ", ".join(f"{backend} {seconds:.0f} s" for backend, (_, seconds) in runs.items())
            # The machine may be shared: the load says how much of it the figures had.
            + f" (load average {os.getloadavg()[0]:.1f} after)"
        )
        for backend, (output, _) in runs.items():
            for figure, size, value in script.parse(output):
                key = (figure, size)
                if key not in table:
                    table[key] = {}
                    order.append(key)
                table[key][backend] = value
        if args.only:
            _drop_stale(script, runs, table, order)
    total = time.perf_counter() - began
    lines = [
        "# Benchmark report",
        "",
        f"Written by `make bench{' QUICK=1' if args.quick else ' BIG=1' if args.big else ''}` (`bench/report.py`) on "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC: {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} cores, "
        f"{'quick sizes' if args.quick else 'the largest sizes' if args.big else 'the documented sizes'}"
        f"{f' (this run: {args.only}; the other figures are kept from the report before it)' if args.only else ''}. "
        "Each script ran in its "
        "own process on a throwaway SQLite file and a throwaway PostgreSQL database; the raw outputs are in "
        "`bench/results/` (not committed). `q` is SQL statements per operation. Figures are wall-clock "
        "times of one machine and only comparable within this table; the scripts assert nothing about time.",
        "",
        "| figure | size | SQLite | PostgreSQL |",
        "|---|---|---|---|",
    ]
    figures = list(dict.fromkeys(figure for figure, _size in order))
    for figure, size in sorted(order, key=lambda key: figures.index(key[0])):
        cells = table[(figure, size)]
        lines.append(f"| {figure} | {size} | {cells.get('sqlite', '-')} | {cells.get('postgresql', '-')} |")
    lines += ["", f"Run time {total / 60:.1f} min: " + "; ".join(durations) + ".", ""]
    REPORT.write_text("\n".join(lines) + _notes_of_previous_report())
    print(f"wrote {REPORT.relative_to(BENCH.parent)} ({len(order)} figures) in {total:.0f} s")


if __name__ == "__main__":
    main()

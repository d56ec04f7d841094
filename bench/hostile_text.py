"""Benchmark the patterns and parsers that read user text, on hostile inputs.

The inputs are tests/ops/test_hostile_text.py's (`hostile_runs`, here at 10^5 characters built against each
pattern's shape), which there assert what each call returns; here is how long each takes. For each
family (ingest, a chat message's rendering, the answer patterns, the link check) it prints the
slowest inputs in CPU seconds at 10^5 characters and at four times that (the input four times
over): a linear pattern takes about 4x as long, a quadratic one about 16x.

Run: .venv/bin/python bench/hostile_text.py [--top 5]
It asserts nothing about time.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import setup_django


def _cpu_seconds(read: Callable[[str], object], text: str) -> float:
    began = time.process_time()
    read(text)
    return time.process_time() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=5, help="how many of the slowest inputs of each family to print")
    args = parser.parse_args()
    setup_django("", "hostile_text")

    from knowledge.answers import Answer, best_sentences
    from knowledge.chunking import chunk_blocks
    from knowledge.formats import markdown_blocks, text_blocks
    from knowledge.markup import CitationPreview, link_allowed, message_html
    from knowledge.search import search_terms
    from tests.ops.test_hostile_text import hostile_runs

    RUNS = hostile_runs(100_000)

    previews = {1: CitationPreview(source="[1] a.md, chunk 1:", text="x")}
    families: dict[str, Callable[[str], object]] = {
        "ingest (Markdown and text, chunked)": lambda text: (
            chunk_blocks(markdown_blocks(text), max_chunks=len(text) * 10),
            chunk_blocks(text_blocks(text), max_chunks=len(text) * 10),
        ),
        "chat message rendering": lambda text: message_html(text, message_id="msg_1", previews=previews),
        "answer patterns (quotes, terms, markers)": lambda text: (
            best_sentences(text, ["backup", "kept"]),
            search_terms(text),
            Answer(text=text, citations=()).persisted_citations(),
        ),
        "link check": lambda text: (link_allowed(text), link_allowed(text + ":")),
    }
    print(f"{len(RUNS)} hostile inputs of 10^5 characters; CPU seconds, the slowest {args.top} of each family")
    for family, read in families.items():
        spent = {name: _cpu_seconds(read, text) for name, text in RUNS.items()}
        print(f"\n{family}: all {len(RUNS)} inputs in {sum(spent.values()):.2f} s")
        for name in sorted(spent, key=spent.get, reverse=True)[: args.top]:
            longer = _cpu_seconds(read, RUNS[name] * 4)
            growth = longer / spent[name] if spent[name] else float("nan")
            print(f"  {name:<40} {spent[name]:7.3f} s; 4x as long: {longer:7.3f} s ({growth:.1f}x)")


if __name__ == "__main__":
    main()

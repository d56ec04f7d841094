"""Sums the results of every suite .ci/run ran into one closing line: `N passed, N failed, N skipped`.

Reads pytest's closing line ("850 passed, 9 skipped in 80s") and schemathesis's case count
("3500 generated, 3500 passed") from each log named on the command line. A log with neither
counts as one failure, so a suite that died without a result cannot pass unnoticed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PYTEST_LINE = re.compile(r"^=*\s*(?P<body>(\d+ \w+(, )?)+) in [\d.]+s")
PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")
FUZZ_LINE = re.compile(r"(\d+) generated, (\d+) passed(?:, (\d+) failed)?")


def counts(text: str) -> tuple[int, int, int] | None:
    lines = text.splitlines()
    for line in reversed(lines):
        if PYTEST_LINE.match(line.strip("= ")) or PYTEST_LINE.match(line):
            found = {kind: int(number) for number, kind in PYTEST_COUNT.findall(line)}
            if not found:
                continue  # schemathesis closes with a pytest-like "2 warnings in 108.93s"
            failed = found.get("failed", 0) + found.get("error", 0) + found.get("errors", 0)
            return found.get("passed", 0), failed, found.get("skipped", 0)
    for line in reversed(lines):
        match = FUZZ_LINE.search(line)
        if match:
            generated, passed = int(match.group(1)), int(match.group(2))
            return passed, generated - passed, 0
    return None


def main(paths: list[str]) -> int:
    passed = failed = skipped = 0
    for path in paths:
        found = counts(Path(path).read_text(errors="replace"))
        if found is None:
            sys.stderr.write(f"{path}: no test result found\n")
            failed += 1
            continue
        passed, failed, skipped = passed + found[0], failed + found[1], skipped + found[2]
    sys.stdout.write(f"{passed} passed, {failed} failed, {skipped} skipped\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""How many tests stand behind a claim: the tests pytest collects under a folder (no test runs, no timing).

    .venv/bin/python benchmarks/bench_tests.py [--folders tests/robustness]

The README's "hostile input" row counts `tests/robustness/` this way: `pytest --collect-only -q` with the
project's options, every marker included (`-m ""`: the slow ones count too).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

from benchlib import ROOT, emit


def collected(folder: str) -> int:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-m", "", "-p", "no:cacheprovider",
                          "-n", "0", folder], cwd=ROOT, capture_output=True, text=True, timeout=600)
    found = re.search(r"(\d+) tests? collected", out.stdout)
    if out.returncode != 0 or not found:
        raise SystemExit(f"bench_tests.py: pytest could not collect {folder}: {out.stdout[-500:]}{out.stderr[-500:]}")
    return int(found.group(1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--folders", nargs="+", default=["tests/robustness"])
    p.add_argument("--threads", default=None, help="ignored (no timing here)")
    p.add_argument("--quick", action="store_true", help="ignored (no timing here)")
    args = p.parse_args()
    for folder in args.folders:
        emit(f"tests: collected in {folder}", "tests", collected(folder), note="pytest --collect-only -m ''")


if __name__ == "__main__":
    main()

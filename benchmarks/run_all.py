#!/usr/bin/env python3
"""The old name of run.py, kept for the commands written in older pages and commits.

    .venv/bin/python benchmarks/run_all.py [--only decode,padding] [--threads N] [--no-extras]

is `benchmarks/run.py decode padding [--threads N] [--no-extras]`. `--merge` and `--render-only` are accepted and
need nothing any more: results.py appends rows (it never drops the rows a run does not measure again), and
`--render-only` is `benchmarks/render.py`. `--quick` runs the scripts as a smoke test that records nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import run

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default="")
    p.add_argument("--threads", default="auto")
    p.add_argument("--no-extras", action="store_true")
    p.add_argument("--merge", action="store_true", help="ignored: rows are always appended")
    p.add_argument("--render-only", action="store_true", help="only re-render the pages (render.py)")
    p.add_argument("--quick", action="store_true", help="a smoke run: every script with --quick, nothing recorded")
    args = p.parse_args(argv)
    if args.render_only:
        return subprocess.run([sys.executable, str(HERE / "render.py")], cwd=HERE).returncode
    names = run.resolve([args.only] if args.only else [])
    if args.quick:
        return max(subprocess.run(run.command(n, args.threads, not args.no_extras) + ["--quick"], cwd=HERE).returncode
                   for n in names)
    rest = ["--threads", args.threads] + (["--no-extras"] if args.no_extras else [])
    return run.main(names + rest)


if __name__ == "__main__":
    sys.exit(main())

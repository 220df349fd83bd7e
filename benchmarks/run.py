#!/usr/bin/env python3
"""Re-measure figures by name, then re-render every page that shows them.

    make bench                                  # installs .[bench] (transformers, ctranslate2, ...), runs them all
    make bench FIGURE=padding                   # one figure: the same as the next line
    .venv/bin/python benchmarks/run.py padding [decode_paths ...] [--threads auto|N] [--no-extras] [--no-render]
    .venv/bin/python benchmarks/run.py --list   # the names, their scripts and arguments

Each name is a script (FIGURES below: bench_NAME.py with its arguments), run in its own process (a crash or a
memory peak in one does not touch the others). Each figure it emits is appended to results.jsonl by results.py with
its command, commit, CPU, load, versions and date; nothing is overwritten. Then render.py rewrites the tables
between `<!-- figures:NAME -->` markers in the README, docs/performance.md (+ zh) and RESULTS.md from
results.jsonl (`--no-render` leaves the pages alone).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# name -> the script's arguments besides --threads: exactly the command each headline figure was measured with
FIGURES: dict[str, list[str]] = {
    "tests": [],
    "bleu": [],
    "padding": [],
    "train": ["--bf16", "--compile"],
    "decode": [],
    "memory": [],
    "quality": [],
    "decode_paths": ["--sentences", "200", "--batch1-sentences", "30", "--repeats", "5"],
    "serve": ["--seconds", "20"],
}
SLOW_EXTRAS = {"train": ["--bf16", "--compile"]}  # left out by --no-extras
# short names, and the names of scripts folded into another (their rows in results.jsonl keep the old name):
# bench_decode_floor.py's floor and overhead are bench_decode.py's, bench_engines.py's parity bench_decode_paths.py's
ALIASES = {"paths": "decode_paths", "floor": "decode", "decode_floor": "decode", "engines": "decode_paths"}


def command(name: str, threads: str, extras: bool = True) -> list[str]:
    args = [a for a in FIGURES[name] if extras or a not in SLOW_EXTRAS.get(name, [])]
    return [sys.executable, str(HERE / f"bench_{name}.py"), "--threads", str(threads), *args]


def resolve(names: list[str]) -> list[str]:
    out = []
    for n in names:
        for part in n.split(","):
            part = ALIASES.get(part.strip(), part.strip())
            if part and part not in FIGURES:
                raise SystemExit(f"run.py: no figure named {part!r}; the names: {', '.join(FIGURES)}")
            if part:
                out.append(part)
    return out or list(FIGURES)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*", help=f"figure names (default: all): {', '.join(FIGURES)}")
    p.add_argument("--threads", default="auto")
    p.add_argument("--no-extras", action="store_true", help="leave out the slow extras (bf16, torch.compile)")
    p.add_argument("--no-render", action="store_true", help="measure only; leave the pages as they are")
    p.add_argument("--list", action="store_true", help="print each name's command and exit")
    args = p.parse_args(argv)
    names = resolve(args.names)
    if args.list:
        for n in names:
            print(n + ": " + " ".join(["python", f"benchmarks/bench_{n}.py", "--threads", args.threads,
                                       *FIGURES[n]]))
        return 0
    failed = []
    for name in names:
        cmd = command(name, args.threads, not args.no_extras)
        print("run.py: " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
        if subprocess.run(cmd, cwd=HERE).returncode != 0:
            failed.append(name)
    if not args.no_render:
        subprocess.run([sys.executable, str(HERE / "render.py")], cwd=HERE, check=True)
    if failed:
        print(f"run.py: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

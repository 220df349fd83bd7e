#!/usr/bin/env python3
"""Run every benchmark, collect their JSON lines, write benchmarks/RESULTS.md (and results.jsonl).

    make bench                                    # installs .[bench] (transformers, ctranslate2, psutil), runs this
    .venv/bin/python benchmarks/run_all.py [--threads auto|N] [--quick] [--only decode,padding] [--no-extras]

Each script runs in its own process (a crash or a memory peak in one does not touch the others) and prints one
JSON line per figure (see benchlib.emit). RESULTS.md holds one table: figure, ours, peer, ratio, target, met,
with the date, the CPU model (lscpu), the thread count and the load average before and after; docs/performance.md links
it. A figure whose target is missed keeps its row: the reasons are in the "Why" section below the table, which
this script carries over from the previous RESULTS.md (edit it there; `--render-only` rewrites the table from
results.jsonl without measuring).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

from benchlib import describe_machine, log, machine_info, setup_threads

HERE = Path(__file__).resolve().parent
SCRIPTS = {"padding": "bench_padding.py", "train": "bench_train.py", "decode": "bench_decode.py",
           "floor": "bench_decode_floor.py", "memory": "bench_memory.py", "quality": "bench_quality.py",
           "fastpaths": "bench_fast_paths.py", "engines": "bench_engines.py", "serve": "bench_serve.py"}
EXTRAS = {"train": ["--bf16", "--compile"]}  # slow figures, skipped with --no-extras
WHY_MARK = "## Why"


def run_script(name: str, args: argparse.Namespace) -> list[dict]:
    cmd = [sys.executable, str(HERE / SCRIPTS[name]), "--threads", str(args.threads)]
    if args.quick:
        cmd.append("--quick")
    if not args.no_extras:
        cmd += EXTRAS.get(name, [])
    log(f"run_all: {' '.join(cmd[1:])}")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=HERE)
    records = []
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "figure" in record:
                records.append(record)
    if proc.returncode != 0:
        log(f"run_all: {SCRIPTS[name]} exited with {proc.returncode}")
        records.append({"figure": f"{name}: the script failed (exit {proc.returncode})", "unit": "", "ours": None,
                        "peer": None, "peer_name": "", "ratio": None, "target": None, "met": False, "note": ""})
    return records


def _fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"
    return str(x)


def _load(avg) -> str:
    return "(" + ", ".join(f"{x:g}" for x in avg) + ")"


def render(records: list[dict], meta: dict, why: str) -> str:
    machine = describe_machine(meta["machine"]) if "machine" in meta else (
        f"{meta['cpu']}, {meta['cores']} cores, {meta['threads']} torch thread(s), torch {meta['torch']}")
    lines = ["# Benchmark results", "",
             f"Written by `benchmarks/run_all.py` (`make bench`) on {meta['date']}: {machine}. Load average "
             f"(1, 5, 15 min) {_load(meta['load_before'])} before, {_load(meta['load_after'])} after: this machine "
             "is shared, so every ratio compares candidates timed in the same process, interleaved, and reports "
             "medians." + (f" This run measured only `--only {meta['only']}`; the rows kept from earlier runs say in "
                           "their note when and where they were measured (their thread count was that run's)."
                           if meta.get("only") else ""), "",
             "| figure | unit | ours | peer | ours / peer | target | met? | load (1 min) | note |",
             "| --- | --- | ---: | --- | ---: | --- | --- | ---: | --- |"]
    for r in records:
        met = {True: "yes", False: "**no**", None: "-"}[r.get("met")]
        peer = f"{_fmt(r.get('peer'))} ({r.get('peer_name')})" if r.get("peer_name") else _fmt(r.get("peer"))
        ratio = f"{r['ratio']:.2f}x" if r.get("ratio") is not None else "-"
        load = r.get("load", [None])[0]
        lines.append(f"| {r['figure']} | {r.get('unit', '')} | {_fmt(r.get('ours'))} | {peer} | {ratio} | "
                     f"{r.get('target') or '-'} | {met} | {_fmt(load)} | {r.get('note', '')} |")
    missed = [r["figure"] + (f" vs {r['peer_name']}" if str(r.get("target", "")).endswith("x") else "")
              for r in records if r.get("met") is False]
    lines += ["", f"Targets met: {sum(r.get('met') is True for r in records)} of "
                  f"{sum(r.get('met') is not None for r in records)}."
              + (f" Missed: {'; '.join(missed)}." if missed else ""), ""]
    return "\n".join(lines) + "\n" + why


def _key(record: dict) -> tuple[str, str]:
    return record["figure"], record.get("peer_name", "")


def merged_records(jsonl: Path, records: list[dict], meta: dict) -> list[dict]:
    """The previous results.jsonl's rows that `records` does not measure again, then `records`; a kept row from
    another day or CPU says so in its note."""
    new = {_key(r) for r in records}
    kept = []
    for line in jsonl.read_text(encoding="utf-8").splitlines()[1:]:
        r = json.loads(line) if line.strip() else {}
        if "figure" not in r or _key(r) in new:
            continue
        if (r.get("date"), r.get("cpu")) != (meta["date"], meta["cpu"]):
            measured = f"measured {r.get('date')} on {r.get('cpu')}"
            if measured not in r.get("note", ""):
                r["note"] = f"{r.get('note', '')}; {measured}".lstrip("; ")
        kept.append(r)
    return kept + records


def previous_why(path: Path) -> str:
    if path.exists():
        text = path.read_text(encoding="utf-8")
        if WHY_MARK in text:
            return text[text.index(WHY_MARK):]
    return f"{WHY_MARK} targets are missed\n\n(Explain each missed target here; run_all.py keeps this section.)\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", default="auto")
    p.add_argument("--quick", action="store_true", help="fewer repeats: a smoke run, not a measurement")
    p.add_argument("--only", default=",".join(SCRIPTS), help=f"comma-separated subset of {', '.join(SCRIPTS)}")
    p.add_argument("--no-extras", action="store_true", help="skip the slow extra figures (bf16, torch.compile)")
    p.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    p.add_argument("--merge", action="store_true",
                   help="keep the rows of results.jsonl that this run does not measure again (with --only), each "
                        "marked with the date and CPU it was measured on")
    p.add_argument("--render-only", action="store_true",
                   help="rewrite RESULTS.md from results.jsonl (after editing its Why section) without measuring")
    args = p.parse_args()
    jsonl = args.out.with_name("results.jsonl")
    if args.render_only:
        lines = [json.loads(x) for x in jsonl.read_text(encoding="utf-8").splitlines() if x.strip()]
        meta, records = lines[0]["meta"], [r for r in lines[1:] if "figure" in r]
        args.out.write_text(render(records, meta, previous_why(args.out)), encoding="utf-8")
        return
    import torch

    threads = setup_threads(args.threads)
    args.threads = threads  # every script uses the same count
    info = machine_info(threads)
    meta = {"date": datetime.date.today().isoformat(), "cpu": info["cpu"], "cores": info["cores"],
            "threads": threads, "torch": torch.__version__, "machine": info,
            "load_before": tuple(round(x, 2) for x in os.getloadavg())}
    records = []
    for name in [n.strip() for n in args.only.split(",") if n.strip()]:
        records += run_script(name, args)
    meta["load_after"] = tuple(round(x, 2) for x in os.getloadavg())
    if args.merge and jsonl.is_file():
        records = merged_records(jsonl, records, meta)
        meta["only"] = args.only
    why = previous_why(args.out)
    args.out.write_text(render(records, meta, why), encoding="utf-8")
    with open(jsonl, "w", encoding="utf-8") as f:
        f.write(json.dumps({"meta": meta}) + "\n")
        for r in records:
            f.write(json.dumps({"date": meta["date"], "cpu": meta["cpu"], **r}, ensure_ascii=False) + "\n")
    log(f"run_all: wrote {args.out} ({len(records)} figures)")


if __name__ == "__main__":
    main()

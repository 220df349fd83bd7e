#!/usr/bin/env python3
"""The service under load: `scratchformer serve` on 127.0.0.1 with 1, 4, 16 and 64 concurrent clients, batching on
(--set batch_wait_ms=10, the default) and off (--set batch_wait_ms=0).

    .venv/bin/python benchmarks/bench_serve.py [--run-dir models/en-zh] [--seconds 10] [--clients 1,4,16,64]
                                               [--beam 4] [--wait-ms 10] [--threads auto|N] [--quick]

Bounded and on loopback only: the server binds 127.0.0.1 on a free port; each level runs `--seconds`, then the
clients stop and the server gets SIGTERM. Each client is a closed loop over one keep-alive connection: it posts one
test-split sentence (LibreTranslate JSON), waits for the answer, posts the next. Figures per mode and level:
requests/s, sentences/s, p50 / p95 / p99 latency and errors, printed as a table (stderr) and as JSON lines; the
ratios compare each level with the same mode's single client. Targets (issue 13): 0 errors at 64 clients; at 16
clients with batching, >= 3x the sequential throughput and p99 under 2 s. Last, the cost of the HTTP path: 8
sentences one at a time over HTTP against the Translator in this process, interleaved.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch
from benchlib import ROOT, add_common_args, emit, interleave, log, median, setup_threads

from scratchformer.cli.serve_cmd import default_threads
from scratchformer.data.corpus import load_pairs
from scratchformer.engines import Translator
from scratchformer.runs import load_run
from scratchformer.serve.metrics import quantile


def start(run_dir: Path, threads: int | None, wait_ms: float, beam: int,
          step: str = "auto") -> tuple[subprocess.Popen, int]:
    """`scratchformer serve` on 127.0.0.1 and a free port, in a child process; (process, port) once it listens.
    threads None: serve's own default (cli/serve_cmd.py's default_threads), as a user runs it."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    given = [] if threads is None else ["--threads", str(threads)]
    proc = subprocess.Popen([sys.executable, "-m", "scratchformer", "serve", str(run_dir), "--host", "127.0.0.1",
                             "--port", "0", *given, "--set", f"batch_wait_ms={wait_ms}", "--beam",
                             str(beam), "--step", step], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    for line in proc.stderr:
        if " on http://" in line:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # drain the rest
            return proc, int(line.rsplit(":", 1)[1])
    raise SystemExit(f"bench_serve: the server did not start (exit {proc.wait()})")


def client(port: int, sentences: list[str], offset: int, deadline: float, out: list) -> None:
    """Post one sentence at a time until `deadline`; append (latency s, ok) per request to `out`."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    i = offset
    while time.monotonic() < deadline:
        body = json.dumps({"q": sentences[i % len(sentences)], "source": "en", "target": "zh"})
        start = time.monotonic()
        try:
            conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            ok = response.status == 200 and "translatedText" in json.loads(response.read())
        except (OSError, http.client.HTTPException, ValueError):
            ok = False
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        out.append((time.monotonic() - start, ok))
        i += 97  # clients walk the split on different strides of one order: different sentences at once
    conn.close()


def get(port: int, path: str) -> str:
    """The body of the server's GET `path`."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path)
    body = conn.getresponse().read().decode()
    conn.close()
    return body


def batches(port: int) -> tuple[float, float]:
    """(requests merged, decoding calls) so far, from the server's /metrics."""
    text = get(port, "/metrics")
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    name = "scratchformer_serve_batch_requests"
    return float(values[f"{name}_sum"]), float(values[f"{name}_count"])


def ready(port: int, limit: float = 900.0) -> str:
    """The step in use once the server's start-up work is done (a compile, or timing a cached package for this
    thread count, in the background: `compiling ...` meanwhile): levels measure the steady state."""
    end = time.monotonic() + limit
    while (step := step_in_use(port)).startswith("compiling") and time.monotonic() < end:
        time.sleep(1.0)
    return step


def step_in_use(port: int) -> str:
    """What the server decodes with now, from its /health: `captured bf16`, `compiling fp32`, `eager fp32` ..."""
    return str(json.loads(get(port, "/health")).get("step", "?"))


def level(port: int, sentences: list[str], clients: int, seconds: float) -> dict:
    """`clients` closed-loop clients for `seconds`; their figures."""
    results: list[list] = [[] for _ in range(clients)]
    merged, calls = batches(port)
    deadline = time.monotonic() + seconds
    start = time.monotonic()
    threads = [threading.Thread(target=client, args=(port, sentences, 13 * c, deadline, results[c]))
               for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start  # includes the answers still arriving after the deadline
    done = [r for rs in results for r in rs]
    latencies = sorted(lat for lat, ok in done if ok)
    n_ok = len(latencies)
    merged_after, calls_after = batches(port)
    return {"clients": clients, "requests_s": n_ok / elapsed, "sentences_s": n_ok / elapsed,
            "p50": quantile(latencies, 0.5), "p95": quantile(latencies, 0.95), "p99": quantile(latencies, 0.99),
            "errors": len(done) - n_ok, "requests": len(done),
            "per_batch": (merged_after - merged) / max(1.0, calls_after - calls)}


def overhead(port: int, run_dir: Path, sentences: list[str], beam: int, repeats: int) -> dict:
    """Seconds per sentence, one at a time: over HTTP against the Translator in this process, interleaved."""
    run = load_run(run_dir)
    translator = Translator(run, run.decoding.pick(beam=beam))  # the run's decoding.json, as the server's

    def http_all() -> None:  # a fresh connection each round: uvicorn closes one idle for 5 s
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        for text in sentences:
            conn.request("POST", "/translate", json.dumps({"q": text, "source": "en", "target": "zh"}),
                         {"Content-Type": "application/json"})
            conn.getresponse().read()
        conn.close()

    def direct_all() -> None:
        for text in sentences:
            translator.translate([text])

    times = interleave({"http": http_all, "direct": direct_all}, repeats)
    return {name: median(ts) / len(sentences) for name, ts in times.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p)
    p.add_argument("--run-dir", type=Path, default=ROOT / "models" / "en-zh")
    p.add_argument("--seconds", type=float, default=10.0, help="seconds of load per level (each mode, each count)")
    p.add_argument("--clients", default="1,4,16,64", help="concurrent client counts, comma-separated")
    p.add_argument("--beam", type=int, default=4, help="the server's beam (default 4, as `translate`)")
    p.add_argument("--step", default="auto", help="the server's --step: auto, eager or captured (compiled at start-up "
                   "unless this user's cache has it)")
    p.add_argument("--wait-ms", type=float, default=10.0, help="serve's batch_wait_ms with batching on")
    args = p.parse_args()
    # auto: serve's own default, as a user runs it (no --threads), and this process's in-process comparison on as many
    threads = setup_threads(default_threads() or torch.get_num_threads() if args.threads == "auto" else args.threads)
    server = None if args.threads == "auto" else threads
    seconds = 3.0 if args.quick else args.seconds
    counts = [int(c) for c in args.clients.split(",")]
    sentences = [s for s, _ in load_pairs("en-zh", "test", on_error="skip")]
    table = []
    for mode, wait in (("batching on", args.wait_ms), ("batching off", 0.0)):
        proc, port = start(args.run_dir, server, wait, args.beam, args.step)
        try:
            level(port, sentences, 1, min(2.0, seconds))  # warm-up: first calls, allocator, caches
            in_use = ready(port)
            rows = [level(port, sentences, n, seconds) for n in counts]
            if wait == 0:
                cost = overhead(port, args.run_dir, sentences[::97][:8], args.beam, 2 if args.quick else 3)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
        for row in rows:
            row["mode"], row["x_sequential"] = mode, row["sentences_s"] / rows[0]["sentences_s"]
            row["step"] = in_use
            table.append(row)
    log(f"bench_serve: {args.run_dir.name}, beam {args.beam}, --step {args.step}, {threads} server thread(s), "
        f"{seconds:g} s per level")
    log("| mode | clients | requests/s | sentences/s | x sequential | p50 s | p95 s | p99 s | errors | requests "
        "per batch |")
    for r in table:
        log(f"| {r['mode']} | {r['clients']} | {r['requests_s']:.2f} | {r['sentences_s']:.2f} | "
            f"{r['x_sequential']:.2f}x | {r['p50']:.3f} | {r['p95']:.3f} | {r['p99']:.3f} | {r['errors']} | "
            f"{r['per_batch']:.1f} |")
    log(f"bench_serve: one sentence at a time, {cost['http']:.3f} s over HTTP, {cost['direct']:.3f} s in-process")
    report(table, args.beam, threads, args.step)
    emit("serve: one sentence at a time over HTTP vs the Translator in-process", "s/sentence", cost["http"],
         cost["direct"], "in-process", higher_is_better=False, note=f"beam {args.beam}, {threads} thread(s); "
         "8 test sentences, interleaved, batching off")


def report(table: list[dict], beam: int, threads: int, step: str = "auto") -> None:
    """One JSON figure per mode and level; the targets on the batching-on rows at 16 and 64 clients."""
    for r in table:
        name = f"serve {r['mode']}, {r['clients']} client(s)"
        note = (f"beam {beam}, {threads} thread(s), --step {step} ({r['step']} in use); "
                f"p50/p95/p99 {r['p50']:.2f}/{r['p95']:.2f}/{r['p99']:.2f} s, "
                f"{r['errors']} errors of {r['requests']}, {r['per_batch']:.1f} requests per batch")
        first = table[[t["mode"] for t in table].index(r["mode"])]
        on16 = r["mode"] == "batching on" and r["clients"] == 16
        emit(f"{name}: sentences/s", "sentences/s", r["sentences_s"], first["sentences_s"], "1 client",
             target_ratio=3.0 if on16 else None, note=note)
        if on16:
            emit(f"{name}: p99 latency", "s", r["p99"], higher_is_better=False, target_ours=2.0, note=note)
        if r["clients"] == 64:
            emit(f"{name}: errors", "requests", r["errors"], higher_is_better=False, target_ours=0, note=note)


if __name__ == "__main__":
    main()

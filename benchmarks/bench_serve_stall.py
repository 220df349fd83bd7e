"""The stall of issue 35, measured on `scratchformer serve models/en-zh` (a subprocess on 127.0.0.1, default limits):

  1. a worst-case request at the default limits (128 sentences of 39 characters, 4,992 in all, that the model
     decodes to their full budget; beam 16, 15 alternatives), then, 2 s later, {"q": "Save."}: how long Save waits;
  2. /health while the worst request runs;
  3. SIGTERM 3 s into another worst-case request: how long until the server exits.

Every wait is bounded (--wait, --term-wait): past it, the figure reads ">N" and the server is killed. --src picks the
source tree the server runs (default: this checkout), so the same script measures an older tree for a before/after:

    python benchmarks/bench_serve_stall.py                       # this checkout
    python benchmarks/bench_serve_stall.py --src /elsewhere/src  # another tree (only read)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# 39 characters of capitals the model has never seen: it copies and invents until the length budget (no early stop)
WORST_TEXT = "XQZV KWPL MNBT RTYU ZXCV QWER ASDF GHJK"
WORST = {"q": [WORST_TEXT] * 128, "source": "en", "target": "zh", "beam": 16, "alternatives": 15}
SAVE = {"q": "Save.", "source": "en", "target": "zh"}


def post(url: str, body: dict, timeout: float) -> tuple[int | str, float]:
    """(status, or "timeout"/an error name; seconds) of one JSON POST."""
    start = time.monotonic()
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            status: int | str = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    except TimeoutError:
        status = "timeout"
    except OSError as e:
        status = type(e).__name__
    return status, time.monotonic() - start


def get(url: str) -> tuple[int | str, object]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
    except OSError as e:
        return type(e).__name__, None


def start(src: Path, run: Path, threads: int) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.Popen([sys.executable, "-m", "scratchformer", "serve", str(run), "--port", "0", "--threads",
                             str(threads)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if " on http://" in line:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep draining
            return proc, line.rsplit(" on ", 1)[1].strip()
    raise SystemExit(f"the server did not start (exit {proc.wait()})")


def background(url: str, body: dict, timeout: float, out: dict) -> threading.Thread:
    thread = threading.Thread(target=lambda: out.update(zip(("status", "seconds"), post(url, body, timeout))),
                              daemon=True)
    thread.start()
    return thread


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", type=Path, default=ROOT / "src", help="the source tree the server runs")
    p.add_argument("--run", type=Path, default=ROOT / "models" / "en-zh")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--wait", type=float, default=150, help="most seconds to wait for an answer")
    p.add_argument("--term-wait", type=float, default=120, help="most seconds to wait for the exit after SIGTERM")
    args = p.parse_args()

    proc, url = start(args.src, args.run, args.threads)
    result: dict[str, object] = {"src": str(args.src), "threads": args.threads}
    try:
        result["save_alone"] = post(url + "/translate", SAVE, args.wait)
        worst: dict = {}
        thread = background(url + "/translate", WORST, args.wait, worst)
        time.sleep(2)
        result["save_after_worst"] = post(url + "/translate", SAVE, args.wait)
        result["health_during_worst"] = get(url + "/health")
        thread.join(args.wait)
        result["worst"] = (worst.get("status", f">{args.wait:g} s"), worst.get("seconds"))
        result["save_after_the_worst_answered"] = post(url + "/translate", SAVE, args.wait)

        worst2: dict = {}
        background(url + "/translate", WORST, args.term_wait, worst2)
        time.sleep(3)
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        try:
            code = proc.wait(args.term_wait)
            result["sigterm_exit"] = (code, round(time.monotonic() - t0, 1))
        except subprocess.TimeoutExpired:
            result["sigterm_exit"] = ("still running, killed", f">{args.term_wait:g} s")
        result["worst_during_sigterm"] = (worst2.get("status"), worst2.get("seconds"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    rounded = {k: [round(x, 2) if isinstance(x, float) else x for x in v] if isinstance(v, tuple) else v
               for k, v in result.items()}
    print(json.dumps(rounded, ensure_ascii=False))


if __name__ == "__main__":
    main()

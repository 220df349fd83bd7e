"""scratchformer's CTranslate2 (or onnxruntime) engine in a child process, driven over a pipe by
bench_decode_paths.py.

Why a child: a ctranslate2.Translator that has run once in the benchmark's own process halves the speed of
every later torch call in that process (ours and Hugging Face alike) on small, memory-bound steps: MKL GEMV at
2 threads fell from ~53 to ~24 GB/s after one CTranslate2 call and never recovered (two OpenMP runtimes, torch's
and CTranslate2's bundled libgomp, in one process; with OMP_WAIT_POLICY=PASSIVE torch is as slow before the call
as after, so torch loses its spin-waiting fast path). In its own process CTranslate2 runs at the same speed, and
the rounds stay interleaved with ours: the parent times each request, which costs ~0.1 ms of pipe latency.

Protocol (one JSON object per line, each answered by one line):
    {"engine": run_dir, "name": e, "threads": n, "compute_type": c, "patience": p}
                                                        -> "ok"  scratchformer's engine `e` (ctranslate2, the
                                                                 default, or onnxruntime) on a run
    {"translate": [text, ...], "beam": k, "batch_size": b}
                                                        -> a JSON list of the translations
"""

from __future__ import annotations

import json
import subprocess
import sys


def serve() -> None:
    engine = None
    for line in sys.stdin:
        msg = json.loads(line)
        if "translate" in msg:
            print(json.dumps(engine.translate(msg["translate"], beam=msg["beam"], batch_size=msg["batch_size"]),
                             ensure_ascii=False), flush=True)
            continue
        if "engine" in msg:
            from scratchformer.engines import Translator
            from scratchformer.runs import load_run

            name = msg.get("name", "ctranslate2")
            options = ({"compute_type": msg.get("compute_type", "float32"), "patience": msg.get("patience", 2.0)}
                       if name == "ctranslate2" else {})
            run = load_run(msg["engine"])
            engine = Translator(run, run.decoding.pick(engine=name), threads=msg["threads"], **options)
        print("ok", flush=True)


class CT2Process:
    """The parent's handle: `request(dict)` sends one message and waits for its answer."""

    def __init__(self, threads: int) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1, encoding="utf-8")
        self.threads = threads

    def request(self, msg: dict) -> None:
        answer = self.ask(msg, json_answer=False)
        if answer != "ok":
            raise RuntimeError(f"CTranslate2 worker failed on {list(msg)}: answered {answer!r}")

    def ask(self, msg: dict, json_answer: bool = True):
        """Send one message; its one-line answer (parsed as JSON unless json_answer=False)."""
        self.proc.stdin.write(json.dumps(msg, ensure_ascii=False) + "\n")
        answer = self.proc.stdout.readline().strip()
        if not json_answer:
            return answer
        try:
            return json.loads(answer)
        except ValueError:
            raise RuntimeError(f"CTranslate2 worker failed on {list(msg)}: answered {answer!r}") from None

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


if __name__ == "__main__":
    serve()

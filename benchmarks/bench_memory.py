#!/usr/bin/env python3
"""Peak resident memory of a training step and of decoding, ours against the peers, one fresh process each.

    .venv/bin/python benchmarks/bench_memory.py

Each measurement runs in its own subprocess: it imports what it needs, resets the kernel's peak-RSS mark and reads
the resident set (the baseline), builds or loads its model, does the work, and reads the peak (VmHWM, what
ru_maxrss reports, but without the parent's peak that Linux carries into a fork+exec'd child); the figure is the
difference (model + optimiser state + activations + caches), in MiB. Training: 3 steps of bench_train's set-up
(paper-base, 32 x ~16 tokens, Adam), ours vs torch.nn.Transformer. Decoding: beam 4, batch 32, 64 new tokens
from the Marian folder bench_decode writes, ours vs Hugging Face generate and CTranslate2, all float32 (our own
int8 is gone: docs/performance.md says why).
Lower is better; no target.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import emit, log

HERE = Path(__file__).resolve().parent
TRAIN = ("train_ours", "train_peer")
DECODE = ("decode_ours", "decode_hf", "decode_ct2")


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def start_peak() -> int:
    """Reset the peak-RSS mark to the current RSS (Linux: /proc/self/clear_refs "5") and return the baseline in
    KiB. ru_maxrss alone would not do: Linux carries the parent's peak into a fork+exec'd child, hiding growth."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return _status_kib("VmRSS") or 0
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak_kib() -> int:
    """Peak resident set (KiB) since start_peak: VmHWM, else ru_maxrss."""
    return _status_kib("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(what: str, folder: Path) -> dict[str, float]:
    """Run one measurement in this (fresh) process. Returns MiB: `mib` peak growth over the whole run (the
    figure), `model_mib` resident growth once the model is built or loaded, `work_mib` peak growth of the work
    itself (training steps or decoding) over the loaded model."""
    import torch

    torch.set_num_threads(1)
    if what.startswith("train"):
        from bench_train import TorchTransformerMT, make_batch, train_config, train_step

        from scratchformer import build_model

        src, tgt = make_batch()
        base = start_peak()
        config = train_config()
        model = build_model(config) if what == "train_ours" else TorchTransformerMT(config)
        loaded, load_peak = _loaded()
        step = train_step(model, src, tgt)
        for _ in range(3):
            step()
    else:
        from bench_decode import NEW, START, ct2_tokens, sources

        src = sources(32)
        if what == "decode_ours":
            from scratchformer.decoding import beam_search
            from scratchformer.decoding.spec import Search
            from scratchformer.interop.huggingface import from_pretrained

            base = start_peak()
            model = from_pretrained(folder / "marian").eval().inference_layout()
            loaded, load_peak = _loaded()
            beam_search(model, src, Search(beam=4, max_output_len=NEW, bos=START, min_len=NEW))
        elif what == "decode_hf":
            from bench_decode import hf_fn, hf_model

            base = start_peak()
            model = hf_model(folder / "marian")
            loaded, load_peak = _loaded()
            hf_fn(model, src, 4)()
        else:
            import ctranslate2

            base = start_peak()
            translator = ctranslate2.Translator(str(folder / "ct2"), device="cpu", compute_type="float32",
                                                intra_threads=1)
            loaded, load_peak = _loaded()
            translator.translate_batch(ct2_tokens(src), beam_size=4, max_decoding_length=NEW, min_decoding_length=NEW)
    work_peak = peak_kib()
    return {"mib": (max(load_peak, work_peak) - base) / 1024, "model_mib": (loaded - base) / 1024,
            "work_mib": (work_peak - loaded) / 1024}


def _loaded() -> tuple[int, int]:
    """(resident KiB now, peak KiB so far), then reset the peak mark for the work phase."""
    peak = peak_kib()
    return start_peak(), peak


def measure(what: str, folder: Path) -> dict[str, float] | None:
    proc = subprocess.run([sys.executable, str(Path(__file__)), "--child", what, "--folder", str(folder)],
                          capture_output=True, text=True, cwd=HERE)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        log(f"bench_memory: {what} failed: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
        return None
    return json.loads(lines[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--child", choices=TRAIN + DECODE, help=argparse.SUPPRESS)
    p.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--threads", default=None, help="ignored: every child uses 1 thread")
    p.add_argument("--quick", action="store_true", help="ignored (each figure is one run)")
    p.add_argument("--repeats", default=None, help="ignored")
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.folder)), flush=True)
        return
    with tempfile.TemporaryDirectory(prefix="sf-bench-memory-") as tmp:
        folder = Path(tmp)
        from bench_decode import build_ours, ct2_convert

        from scratchformer.interop.huggingface import save_pretrained

        ours = build_ours()
        save_pretrained(ours, folder / "marian")
        try:
            ct2_convert(ours, folder / "ct2")
        except ImportError:
            log("bench_memory: CTranslate2 unavailable; its figures are skipped")
        mib = {what: measure(what, folder) for what in TRAIN + DECODE}
    pairs = [("memory: training step, paper-base, 32 x ~16 tokens, Adam", "train_ours", "train_peer",
              "torch.nn.Transformer"),
             ("memory: decoding fp32, beam 4, batch 32, 64 tokens", "decode_ours", "decode_hf", "HF generate"),
             ("memory: decoding fp32, beam 4, batch 32, 64 tokens", "decode_ours", "decode_ct2", "CTranslate2 float32")]
    for figure, ours, peer, name in pairs:
        if mib[ours] is not None:
            theirs = mib[peer] or {}
            emit(figure, "MiB peak RSS growth", mib[ours]["mib"], theirs.get("mib"), name, higher_is_better=False,
                 note=f"of which model {mib[ours]['model_mib']:.0f} / {theirs.get('model_mib', 0):.0f} MiB, work "
                      f"{mib[ours]['work_mib']:.0f} / {theirs.get('work_mib', 0):.0f} MiB (ours / peer)")


if __name__ == "__main__":
    main()

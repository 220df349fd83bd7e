#!/usr/bin/env python3
"""Where a batch-1 decoding step's time goes: the weights' floor, and each engine's per-step overhead.

    .venv/bin/python benchmarks/bench_decode_floor.py [--threads auto|N] [--quick]

Three figures (ms per generated token, greedy, batch 1, 64 forced tokens; lower is better), no targets: they
explain the batch-1 targets of bench_decode.py.
- floor: the step's matrix-vector products alone: one 1-row F.linear per Linear weight the step reads (the
  decoder's W_qkv, W_o, cross W_q, W_o, FFN W_1, W_2 per layer, and the output layer; paper-base, vocabulary
  8000: 26M fp32 weights, 105 MB), in the model's own order, row-major and column-major (the faster is kept),
  against our whole step on the same model.
- overhead: the same decoding with d_model 64 (d_ff 256, same 6 layers, 8 heads, vocabulary 8000), where the
  arithmetic costs next to nothing and what remains is dispatch: ours against Hugging Face Marian (same
  weights through save_pretrained).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from bench_decode import NEW, START, VOCAB, hf_fn, hf_model, ours_fn, sources
from benchlib import add_common_args, emit, interleave, median, setup_threads
from torch import nn
from torch.nn import functional as F

from scratchformer import ModelConfig, build_model
from scratchformer.interop.huggingface import save_pretrained


def model(d_model: int, d_ff: int) -> nn.Module:
    torch.manual_seed(0)
    config = ModelConfig.preset("paper-base", src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, dropout=0.0,
                                d_model=d_model, d_ff=d_ff, positions="sinusoidal-concat", decoder_start_id=START,
                                max_positions=512)
    return build_model(config).eval()


def step_weights(m: nn.Module) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """(weight, bias) of every Linear a cached decoding step multiplies by, in order (cross W_kv excluded: it
    runs once per sentence)."""
    out = []
    for layer in m.decoder.layers:
        for lin in (layer.self_attn.w_qkv, layer.self_attn.w_o, layer.cross_attn.w_q, layer.cross_attn.w_o,
                    layer.feed_forward.w_1, layer.feed_forward.w_2):
            out.append((lin.weight.detach(), lin.bias))
    out.append((m.generator.proj.weight.detach(), m.generator.proj.bias))
    return out


def gemv_step(weights: list[tuple[torch.Tensor, torch.Tensor | None]]):
    xs = {w.size(1): torch.randn(1, w.size(1)) for w, _ in weights}

    def run() -> None:
        for w, b in weights:
            F.linear(xs[w.size(1)], w, b)

    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p)
    args = p.parse_args()
    threads = setup_threads(args.threads)
    repeats = args.repeats or (3 if args.quick else 7)
    common = {"threads": threads, "rounds": repeats}
    src = sources(1)

    base = model(512, 2048)
    with torch.inference_mode():
        row = step_weights(base)
        col = [(w.t().contiguous().t(), b) for w, b in row]
        n_bytes = sum(w.numel() * w.element_size() for w, _ in row)
        times = interleave({"row": gemv_step(row), "col": gemv_step(col), "ours": ours_fn(base, src, 1)}, repeats)
        floor = min(median(times["row"]), median(times["col"]))
        step = median(times["ours"]) / NEW
        emit("decode floor: batch-1 step, fp32 paper-base: weight GEMVs alone vs our whole step", "ms/token",
             floor * 1e3, step * 1e3, "ours, whole step (greedy_decode)", higher_is_better=False,
             note=f"{n_bytes / 1e6:.0f} MB of weights per step, {n_bytes / floor / 1e9:.0f} GB/s; row-major "
                  f"{median(times['row']) * 1e3:.2f} ms, column-major {median(times['col']) * 1e3:.2f} ms", **common)

    small = model(64, 256)
    with tempfile.TemporaryDirectory(prefix="sf-bench-floor-") as tmp:
        hf = hf_model(save_pretrained(small, Path(tmp) / "marian"))
        times = interleave({"ours": ours_fn(small, src, 1), "hf": hf_fn(hf, src, 1)}, repeats, warmup=2)
    emit("decode overhead: batch-1 step at d_model 64 (arithmetic ~0), ours vs HF", "ms/token",
         median(times["ours"]) / NEW * 1e3, median(times["hf"]) / NEW * 1e3, "HF MarianMTModel.generate",
         higher_is_better=False, note="6+6 layers, 8 heads, d_ff 256, vocabulary 8000: per-step dispatch cost",
         **common)


if __name__ == "__main__":
    main()

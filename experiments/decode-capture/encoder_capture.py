#!/usr/bin/env python3
"""Issue 31's first lever, measured before it is built: the shipped model's encoder (embedding + 3 layers) as it runs
now (eager modules) against the same encoder compiled by AOTInductor with frozen weights, dynamic batch and source
length, and (for one sentence) a max-autotune package with its row count fixed, as the decoding step's packages are.
Interleaved, best of `--rounds` rounds; outputs checked against the eager encoder.

    PYTHONPATH=src .venv/bin/python experiments/decode-capture/encoder_capture.py [--shapes 1x20,32x30] [--rounds 5]

A study: nothing here is shipped (the decoding step's packages are, in src/scratchformer/decoding/captured.py).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
from torch import nn

from scratchformer.runs import load_run

ROOT = Path(__file__).resolve().parents[2]


class Encode(nn.Module):
    """model.encode without its argument checks: (src ids (B, L), padding mask (B, 1, 1, L)) -> memory (B, L, D)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.model.encoder(self.model.src_embed(src), mask)


def compile_encoder(module: Encode, folder: Path, tuned: bool, example: tuple[torch.Tensor, torch.Tensor]):
    configs = {"freezing": True}
    if tuned:
        configs.update(max_autotune=True, max_autotune_gemm_backends="CPP,ATEN", autotune_num_choices_displayed=0)
        if hasattr(torch._inductor.config, "max_autotune_report_choices_stats"):
            configs["max_autotune_report_choices_stats"] = False
    batch, length = torch.export.Dim("batch", min=1, max=1024), torch.export.Dim("length", min=2, max=512)
    shapes = ({1: length}, {3: length}) if tuned else ({0: batch, 1: length}, {0: batch, 3: length})
    with torch.no_grad():
        exported = torch.export.export(module, example, dynamic_shapes=shapes)
        path = torch._inductor.aoti_compile_and_package(exported, package_path=str(folder / f"enc-{tuned}.pt2"),
                                                        inductor_configs=configs)
    return torch._inductor.aoti_load_package(path)


def best_ms(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run-dir", type=Path, default=ROOT / "models" / "en-zh")
    p.add_argument("--shapes", default="1x20,32x30", help="sentences x source tokens, comma-separated")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = load_run(args.run_dir).model.eval()
    encode = Encode(model).eval()
    vocab, pad = model.config.src_vocab_size, model.config.pad_id

    def inputs(b: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        src = torch.randint(4, vocab, (b, n))
        src[1:, n - n // 4 :] = pad  # later rows padded, as a batch of unequal sentences is
        return src, model.src_mask(src).contiguous()

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        plain = compile_encoder(encode, Path(tmp), False, inputs(4, 24))
        plain_s = time.perf_counter() - start
        start = time.perf_counter()
        tuned = compile_encoder(encode, Path(tmp), True, inputs(1, 24))
        tuned_s = time.perf_counter() - start
        print(json.dumps({"compile_s": {"plain": round(plain_s, 1), "tuned": round(tuned_s, 1)}}), flush=True)
        for shape in args.shapes.split(","):
            b, n = (int(x) for x in shape.split("x"))
            src, mask = inputs(b, n)
            with torch.inference_mode():
                want = encode(src, mask)
                candidates = {"eager": partial(encode, src, mask), "plain": partial(plain, src, mask)}
                if b == 1:
                    candidates["tuned"] = partial(tuned, src, mask)
                keep = mask[:, 0, 0, :, None]  # padded positions' outputs are never read
                diff = {k: ((fn() - want) * keep).abs().max().item() for k, fn in candidates.items()}
                calls = max(3, 200 // b)
                times = {k: [] for k in candidates}
                for r in range(args.rounds):
                    for k in (list(candidates) if r % 2 == 0 else reversed(list(candidates))):
                        times[k].append(best_ms(candidates[k], calls))
            ms = {k: round(min(v), 3) for k, v in times.items()}
            print(json.dumps({"sentences": b, "tokens": n, "ms": ms, "max_abs_diff": diff,
                              "speedup_over_eager": {k: round(ms["eager"] / v, 2) for k, v in ms.items()}}),
                  flush=True)


if __name__ == "__main__":
    main()

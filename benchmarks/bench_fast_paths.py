#!/usr/bin/env python3
"""The CPU fast paths on this machine: column-major Linear weights, MKL-packed GEMMs; what autotune picks.

    .venv/bin/python benchmarks/bench_fast_paths.py [--threads auto|N] [--quick]

For the shipped model's shapes (models/en-zh/config.json) and paper-base (vocabulary 37000): one decoding
step's GEMMs (every nn.Linear of the decoder and the output layer, on random inputs of 1, 4 and 32 rows),
timed interleaved with each fast path on and off; ratio = off / on (above 1: the fast path is faster). Then
what autotune.py chooses here for the same shapes (measured into a temporary cache, so this run
leaves the user's cache alone). (Its int8 rows went with the torch engine's own int8: CTranslate2's int8 is the one
we keep, docs/performance.md.) About 30 s on 2 busy cores.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import torch
from benchlib import ROOT, add_common_args, emit, interleave, log, median, setup_threads
from torch import nn
from torch.nn import functional as F

from scratchformer import ModelConfig, autotune, build_model
from scratchformer.decoding import packing

ROWS = (1, 4, 32)


def models() -> dict[str, nn.Module]:
    shipped = ModelConfig.load(ROOT / "models" / "en-zh" / "config.json")
    base = ModelConfig.preset("paper-base", src_vocab_size=37000, tgt_vocab_size=37000)
    torch.manual_seed(0)
    return {"en-zh": build_model(shipped).eval(), "paper-base": build_model(base).eval()}


def step_weights(model: nn.Module) -> list[torch.Tensor]:
    """The weights a decoding step multiplies by: decoder Linear layers and the output layer."""
    return [m.weight.detach() for root in (model.decoder, model.generator) for m in root.modules()
            if type(m) is nn.Linear]


def gemms(weights: list[torch.Tensor], rows: int, packed: list | None = None):
    inputs = {w.size(1): torch.randn(rows, w.size(1)) for w in weights}
    if packed is None:
        return lambda: [F.linear(inputs[w.size(1)], w) for w in weights]
    return lambda: [torch.ops.mkl._mkl_linear(inputs[w.size(1)], p, w, None, rows) for w, p in zip(weights, packed)]


def layout_and_packing(name: str, model: nn.Module, repeats: int, threads: int) -> None:
    weights = step_weights(model)
    columns = [w.t().contiguous().t() for w in weights]
    for rows in ROWS:
        cands = {"row-major": gemms(weights, rows), "column-major": gemms(columns, rows)}
        if packing.packing_available():
            cands["packed"] = gemms(weights, rows, [torch.ops.mkl._mkl_reorder_linear_weight(w, rows)
                                                    for w in weights])
        with torch.no_grad():
            t = {k: median(v) for k, v in interleave(cands, repeats, warmup=1).items()}
        emit(f"fast paths: column-major Linear weights, {name} decoding step, {rows} row(s)", "ms",
             t["column-major"] * 1e3, t["row-major"] * 1e3, "row-major", higher_is_better=False, threads=threads,
             note=f"{len(weights)} GEMMs; row-major / column-major = {t['row-major'] / t['column-major']:.2f}")
        if "packed" in t:
            emit(f"fast paths: MKL-packed weights, {name} decoding step, {rows} row(s)", "ms", t["packed"] * 1e3,
                 t["row-major"] * 1e3, "unpacked", higher_is_better=False, threads=threads,
                 note=f"unpacked / packed = {t['row-major'] / t['packed']:.2f}")


def autotune_choices(name: str, model: nn.Module, threads: int) -> None:
    """What load_run and the searches would choose here (autotune's own rule and timing, a temporary cache)."""
    weights = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
    linears = [m for root in (model.decoder, model.generator) for m in root.modules() if type(m) is nn.Linear]
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        os.environ[autotune.ENV] = "1"
        autotune.TUNER = autotune.Tuner(Path(tmp) / "autotune.json", busy=lambda: False)  # measure even if busy
        layout = autotune.linear_layout(list({id(w): w for w in weights}.values()))
        packs = {rows: packing.should_pack(linears, rows) for rows in ROWS}
        data = json.loads((Path(tmp) / "autotune.json").read_text())["choices"]
    for key, entry in data.items():
        decision, _, _, _, shapes = json.loads(key)
        s = entry["seconds"]
        default = "row-major" if decision == "linear-layout" else "unpacked"
        other = next(k for k in s if k != default)
        emit(f"autotune: {decision}, {name}" + (f", {shapes['rows']} row(s)" if decision == "mkl-packing" else ""),
             "ms", s[other] * 1e3, s[default] * 1e3, default, higher_is_better=False, threads=threads,
             note=f"chose {entry['choice']} (switches at > {autotune.MARGIN:g}x)")
    log(f"bench_fast_paths: {name}: layout {layout}, packing by rows {packs}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p)
    args = p.parse_args()
    threads = setup_threads(args.threads)
    repeats = args.repeats or (3 if args.quick else 7)
    built = models()
    for name, model in built.items():
        layout_and_packing(name, model, repeats, threads)
        autotune_choices(name, model, threads)


if __name__ == "__main__":
    main()

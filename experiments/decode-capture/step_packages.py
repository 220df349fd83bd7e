#!/usr/bin/env python3
"""The shipped captured step's two packages (decoding/captured.py: plain, and tuned with max-autotune) against the
lean eager step, per step, at several row counts.

    PYTHONPATH=src .venv/bin/python experiments/decode-capture/step_packages.py [--run-dir models/en-zh]
        [--folder ~/.cache/scratchformer/captured-<key>] [--rows 1,2,4,8,32] [--repeats 5] [--steps 50]

--folder: a package folder the torch engine wrote (`--step captured`, greedy: one row per sentence); without it
both packages are compiled into a temporary folder first (about 1-3 minutes). Printed per row count: microseconds
per step (min of `--repeats` interleaved rounds of `--steps` steps at position 40 of an 80-slot cache, source length
23, one torch thread), the packages' speed-ups, and their largest |logit difference| from the lean step's step
over positions 1-40.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path

import torch
from torch import Tensor

from scratchformer.decoding import captured
from scratchformer.engines.torch_engine import PACKAGE, SMALL  # the shipped packages' file names
from scratchformer.runs import load_run

ROOT = Path(__file__).resolve().parents[2]


def _study():
    spec = importlib.util.spec_from_file_location("capture_step", Path(__file__).with_name("capture_step.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run-dir", type=Path, default=ROOT / "models" / "en-zh")
    p.add_argument("--folder", type=Path)
    p.add_argument("--rows", default="1,2,4,8,32")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args()
    torch.set_num_threads(1)
    model = load_run(args.run_dir).model.eval()
    folder = args.folder
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="step-packages-"))
        step = captured.StaticStep.for_model(model, 1)
        captured.compile_step(step, folder / PACKAGE)
        captured.compile_step(step, folder / SMALL, tuned=True)
    fns = {"plain": captured.load_step(folder / PACKAGE), "tuned": captured.load_step(folder / SMALL)}
    for rows in (int(r) for r in args.rows.split(",")):
        us, diff = measure(model, fns, rows, args.repeats, args.steps)
        print(json.dumps({"rows": rows, "us_per_step": us, "plain_vs_lean": round(us["lean"] / us["plain"], 2),
                          "tuned_vs_plain": round(us["plain"] / us["tuned"], 2),
                          "max_abs_logit_diff_vs_lean": diff, "torch": torch.__version__,
                          "load": [round(x, 2) for x in os.getloadavg()]}), flush=True)


@torch.no_grad()
def step_inputs(model, rows: int, names) -> tuple[Tensor, Tensor, list[Tensor], Tensor, dict[str, list[Tensor]]]:
    """A package's inputs for `rows` random sentences of 23 source tokens: (source mask, encoder output, the cross
    keys/values of every layer, 80 random target ids per row, an 80-slot zeroed static cache per name)."""
    c = model.config
    g = torch.Generator().manual_seed(rows)
    src = torch.randint(4, c.src_vocab_size, (rows, 23), generator=g)
    mask = model.src_mask(src)
    memory = model.encode(src, mask)
    cross = []
    for layer in model.decoder.layers:
        k, v = layer.cross_attn._project_kv(memory)
        cross += [k.contiguous(), v.contiguous()]
    toks = torch.randint(4, c.tgt_vocab_size, (rows, 80), generator=g)
    caches = {n: [torch.zeros(rows, c.n_heads, 80, c.head_dim_k) for _ in range(2 * c.n_decoder_layers)] for n in names}
    return mask, memory, cross, toks, caches


@torch.no_grad()
def measure(model, fns: dict, rows: int, repeats: int, steps: int) -> tuple[dict[str, int], dict[str, float]]:
    """(us per step of lean and each package, their largest |logit difference| from the lean step)."""
    mask, memory, cross, toks, caches = step_inputs(model, rows, fns)
    lean = _study().LeanAt(model, memory, mask, toks, 1)  # position 0 filled (and the encoder's keys/values)
    diff = dict.fromkeys(fns, 0.0)
    for t in range(41):
        tok, pos = toks[:, t : t + 1].contiguous(), torch.tensor([t])
        out = {n: fn(tok, pos, mask, *cross, *caches[n]) for n, fn in fns.items()}
        if t:
            ref = lean(tok, pos)
            diff = {n: max(diff[n], float((out[n] - ref).abs().max())) for n in fns}
    tok, pos = toks[:, 40:41].contiguous(), torch.tensor([40])
    work = {"lean": lambda: lean(tok, pos),
            **{n: (lambda fn=fn, n=n: fn(tok, pos, mask, *cross, *caches[n])) for n, fn in fns.items()}}
    times: dict[str, list[float]] = {n: [] for n in work}
    names = list(work)
    for r in range(repeats):
        for n in names if r % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            for _ in range(steps):
                work[n]()
            times[n].append((time.perf_counter() - start) / steps)
    return {n: round(1e6 * min(t)) for n, t in times.items()}, diff

if __name__ == "__main__":
    main()

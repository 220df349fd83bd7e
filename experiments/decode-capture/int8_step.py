#!/usr/bin/env python3
"""int8 weight-only Linears (torch's `_weight_int8pack_mm`, per-output-channel scales) inside the captured step,
against the float32 captured step, per step (issue 31, item 3).

    PYTHONPATH=src .venv/bin/python experiments/decode-capture/int8_step.py [--run-dir models/en-zh]
        [--rows 1,32] [--steps 100] [--repeats 7] [--threads 1]

Both steps are decoding/captured.py's StaticStep compiled with AOTInductor (dynamic rows, source length and
capacity); the int8 one runs on a copy of the model whose decoder and output Linears compute
`_weight_int8pack_mm(x, int8 weight, scales) + bias`. Printed per row count: microseconds per step (min of
`--repeats` interleaved rounds of `--steps` steps at position 40 of an 80-slot cache, source length 23), their
ratio, the largest |logit difference| and the share of rows whose argmax agrees; also each compile's seconds.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path

import torch
from torch import Tensor, nn

from scratchformer.decoding.captured import StaticStep, compile_step, load_step
from scratchformer.runs import load_run

ROOT = Path(__file__).resolve().parents[2]


class Int8Linear(nn.Module):
    """y = x W^T + b with W stored as int8 and one float scale per output row (weight-only quantisation)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        w = linear.weight.detach().float()
        scale = (w.abs().amax(dim=1) / 127).clamp(min=1e-12)
        self.register_buffer("weight_int8", torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8))
        self.register_buffer("scale", scale)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)

    def forward(self, x: Tensor) -> Tensor:
        y = torch.ops.aten._weight_int8pack_mm(x.reshape(-1, x.size(-1)), self.weight_int8, self.scale)
        y = y.view(*x.shape[:-1], -1)
        return y + self.bias if self.bias is not None else y


def _packages():
    """step_packages.py beside this file (this folder's name is not a package's)."""
    spec = importlib.util.spec_from_file_location("step_packages", Path(__file__).with_name("step_packages.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def int8_copy(model: nn.Module) -> nn.Module:
    """A copy whose decoder and output Linears are Int8Linear (the embeddings stay float32)."""
    m = copy.deepcopy(model)
    m.tgt_embed.token.weight = nn.Parameter(model.tgt_embed.token.weight.detach().clone(), requires_grad=False)
    for parent in [*m.decoder.modules(), m.generator]:
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, Int8Linear(child))
    return m


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run-dir", type=Path, default=ROOT / "models" / "en-zh")
    p.add_argument("--rows", default="1,32")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    model = load_run(args.run_dir).model.eval()
    quantized = int8_copy(model).eval()
    work = Path(tempfile.mkdtemp(prefix="int8-step-"))
    fns, compiled = {}, {}
    for name, m in (("fp32", model), ("int8", quantized)):
        start = time.perf_counter()
        fns[name] = load_step(compile_step(StaticStep.for_model(m, 1), work / f"{name}.pt2"))
        compiled[name] = round(time.perf_counter() - start, 1)
    for rows in (int(r) for r in args.rows.split(",")):
        with torch.no_grad():
            mask, memory, cross, toks, caches = _packages().step_inputs(model, rows, fns)
            out = {n: [fn(toks[:, t : t + 1].contiguous(), torch.tensor([t]), mask, *cross, *caches[n])
                       for t in range(41)] for n, fn in fns.items()}
            diff = max(float((a - b).abs().max()) for a, b in zip(out["fp32"], out["int8"]))
            agree = sum(int((a.argmax(-1) == b.argmax(-1)).sum()) for a, b in zip(out["fp32"], out["int8"]))
            tok, pos = toks[:, 40:41].contiguous(), torch.tensor([40])
            times: dict[str, list[float]] = {n: [] for n in fns}
            names = list(fns)
            for r in range(args.repeats):
                for n in names if r % 2 == 0 else names[::-1]:
                    start = time.perf_counter()
                    for _ in range(args.steps):
                        fns[n](tok, pos, mask, *cross, *caches[n])
                    times[n].append((time.perf_counter() - start) / args.steps)
        us = {n: round(1e6 * min(t), 1) for n, t in times.items()}
        print(json.dumps({"rows": rows, "us_per_step": us, "int8_speedup": round(us["fp32"] / us["int8"], 3),
                          "max_abs_logit_diff": round(diff, 4), "argmax_agree": f"{agree} of {41 * rows}",
                          "compile_s": compiled, "threads": args.threads, "torch": torch.__version__,
                          "load": [round(x, 2) for x in os.getloadavg()]}), flush=True)


if __name__ == "__main__":
    main()

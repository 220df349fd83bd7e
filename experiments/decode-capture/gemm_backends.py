#!/usr/bin/env python3
"""The shipped model's Linear shapes through three fp32 GEMM routes on this CPU, one thread: MKL's sgemm (what
F.linear and the captured step call), oneDNN with its weight packed for the row count
(torch.ops.mkldnn._linear_pointwise, what CTranslate2 uses on a non-Intel CPU) and MKL with a packed weight
(torch.ops.mkl._mkl_linear). Best of 5 rounds of 200 calls; each route's output checked against F.linear.

    .venv/bin/python experiments/decode-capture/gemm_backends.py [--rows 1,4,32,128,800]

A question for the next lever of issue 31 (batch 32), not a shipped path.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F

# models/en-zh: (in, out) of the decoder's self-attention q/k/v/o, FFN up and down, the output layer, and the fused
# cross-attention k/v
SHAPES = [(256, 256), (256, 1024), (1024, 256), (256, 1743), (256, 768)]


def best_us(fn, calls: int = 200, rounds: int = 5) -> float:
    for _ in range(10):
        fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def routes(m: int, n_in: int, n_out: int):
    """F.linear's output, and the three routes as calls, for an (m, n_in) input and an (n_out, n_in) weight."""
    x, w, b = torch.randn(m, n_in), torch.randn(n_out, n_in), torch.randn(n_out)
    onednn_w = torch.ops.mkldnn._reorder_linear_weight(w, m)
    mkl_w = torch.ops.mkl._mkl_reorder_linear_weight(w, m)
    return F.linear(x, w, b), {
        "mkl_sgemm": lambda: F.linear(x, w, b),
        "onednn_packed": lambda: torch.ops.mkldnn._linear_pointwise(x, onednn_w, b, "none", [], ""),
        "mkl_packed": lambda: torch.ops.mkl._mkl_linear(x, mkl_w, w, b, m),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", default="1,4,32,128,800")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    for m in (int(r) for r in args.rows.split(",")):
        for n_in, n_out in SHAPES:
            want, calls = routes(m, n_in, n_out)
            err = max((fn() - want).abs().max().item() for fn in calls.values())
            us = {name: round(best_us(fn), 1) for name, fn in calls.items()}
            print(json.dumps({"rows": m, "in": n_in, "out": n_out, "us": us, "max_abs_diff": err,
                              "onednn_over_mkl": round(us["mkl_sgemm"] / us["onednn_packed"], 2),
                              "mkl_packed_over_mkl": round(us["mkl_sgemm"] / us["mkl_packed"], 2)}), flush=True)


if __name__ == "__main__":
    main()

"""What the training loop reports besides the loss, kept out of the loop: throughput and MFU against the device's
measured matmul peak, and the curve drawn from metrics.jsonl when training ends."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from scratchformer.inspect.flops import matmul_rate
from scratchformer.runs.metrics import read_records
from scratchformer.runs.names import CURVE


class Throughput:
    """Tokens/s and MFU over the window since the last report. MFU is measured against the best matmul rate seen:
    a busy machine measures low at the start, so the peak is measured again, small, at every report."""

    def __init__(self, device: torch.device | str, dtype: torch.dtype) -> None:
        self.device, self.dtype = device, dtype
        self.peak = matmul_rate(device, dtype)
        self.tokens, self.flops, self.start = 0.0, 0.0, time.time()

    def add(self, tokens: float, flops: float) -> None:
        self.tokens, self.flops = self.tokens + tokens, self.flops + flops

    def report(self) -> tuple[float, float]:
        """(tokens per second, MFU) of the window, which then starts again."""
        seconds = max(time.time() - self.start, 1e-9)
        self.peak = max(self.peak, matmul_rate(self.device, self.dtype, n=512, repeats=2))
        tok_s, mfu = self.tokens / seconds, self.flops / seconds / self.peak
        self.tokens, self.flops, self.start = 0.0, 0.0, time.time()
        return tok_s, mfu


def plot_run_curve(run_dir: Path, title: str) -> Path:
    """RUN_DIR/curve.png: the loss and validation curves of metrics.jsonl."""
    from scratchformer.inspect.plots import plot_curves  # late: matplotlib takes a second to import

    return plot_curves(Path(run_dir) / CURVE, read_records(run_dir), title=title)

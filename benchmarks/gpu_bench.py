#!/usr/bin/env python3
"""paper-base on one CUDA GPU (written for an H200): training throughput and model-FLOP utilisation in bf16
(torch.compile, flash / fused SDPA kernels), and greedy decoding throughput at batch 1 and 64. < 5 minutes.

    .venv/bin/python benchmarks/gpu_bench.py [--steps 30] [--tokens 25000] [--no-compile]
    .venv/bin/python benchmarks/gpu_bench.py --smoke      # the same code on the CPU, tiny sizes, in seconds

Exits at once with a clear message when CUDA is absent. `--smoke` runs every path of the script (train step,
MFU arithmetic, decoding) on the CPU with a tiny model, no compile: the test suite runs it, so the script is
known to work before a GPU is lent (its figures mean nothing).

Prints JSON lines like the CPU benchmarks (benchlib.emit);
MFU = analytic matmul FLOPs (benchlib.training_flops) / step time / the GPU's dense bf16 peak (a table of
known GPUs; unknown ones report achieved TFLOP/s only). Batches are unpadded (every sentence L tokens), as the
paper's ~25,000-token batches; our masks are explicit tensors, so SDPA may pick the memory-efficient kernel
where flash takes no mask: the backend list allows flash, memory-efficient and cuDNN attention, never the
math fallback.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from benchlib import emit, training_flops

if TYPE_CHECKING:
    from scratchformer import ModelConfig

from scratchformer.decoding.spec import Search

# Dense (no sparsity) bf16 tensor-core peaks, FLOP/s, from the vendors' data sheets.
BF16_PEAK = {"H200": 989e12, "H100": 989e12, "GH200": 989e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12,
             "L4": 121e12, "RTX 4090": 165e12}


@dataclass(frozen=True)
class Plan:
    """What the GPU run does; CPU-independent so that tests can check it."""

    vocab: int = 37000
    seq_len: int = 32  # tokens per sentence, both sides
    tokens: int = 25000  # target tokens per training batch (the paper's ~25k)
    steps: int = 30  # timed training steps (after warm-up)
    warmup: int = 5
    decode_batches: tuple[int, ...] = (1, 64)
    new_tokens: int = 64
    compile: bool = True
    device: str = "cuda"
    preset: str = "paper-base"

    @property
    def batch(self) -> int:
        return max(1, self.tokens // self.seq_len)

    def step_flops(self, config: ModelConfig) -> float:
        return training_flops(config, self.batch, self.seq_len, self.seq_len)


SMOKE = Plan(vocab=64, seq_len=8, tokens=32, steps=1, warmup=1, decode_batches=(1, 2), new_tokens=4, compile=False,
             device="cpu", preset="tiny")


def peak_flops(device_name: str) -> float | None:
    """The dense bf16 peak of a GPU named like torch.cuda.get_device_name(), or None when unknown."""
    for key in sorted(BF16_PEAK, key=len, reverse=True):  # "GH200" before "H200"
        if key.lower() in device_name.lower():
            return BF16_PEAK[key]
    return None


def require_cuda() -> None:
    if not torch.cuda.is_available():
        sys.exit(f"gpu_bench.py needs a CUDA GPU, and torch {torch.__version__} sees none on this machine "
                 "(torch.cuda.is_available() is False). For the CPU figures run benchmarks/run.py.")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=Plan.steps)
    p.add_argument("--tokens", type=int, default=Plan.tokens)
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--smoke", action="store_true", help="run every path on the CPU with a tiny model (a check)")
    args = p.parse_args(argv)
    if args.smoke:
        plan, name = SMOKE, "CPU (smoke run)"
    else:
        require_cuda()
        plan = Plan(steps=args.steps, tokens=args.tokens, compile=not args.no_compile)
        torch.backends.cuda.matmul.allow_tf32 = True
        name = torch.cuda.get_device_name()
    train(plan, name)
    decode(plan, name)


def _attention_backends(device: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if device != "cuda":
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION])


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def train(plan: Plan, device_name: str) -> None:
    from scratchformer import ModelConfig, build_model
    from scratchformer.training.loss import label_smoothed_loss
    from scratchformer.training.schedule import paper_optimizer

    torch.manual_seed(0)
    config = ModelConfig.preset(plan.preset, src_vocab_size=plan.vocab, tgt_vocab_size=plan.vocab)
    model = build_model(config).to(plan.device).train()
    optimizer = paper_optimizer(model.parameters(), lr=1e-4)
    step_model = torch.compile(model) if plan.compile else model
    src = torch.randint(4, plan.vocab, (plan.batch, plan.seq_len), device=plan.device)
    tgt = torch.randint(4, plan.vocab, (plan.batch, plan.seq_len + 1), device=plan.device)

    def step() -> None:
        with torch.autocast(plan.device, dtype=torch.bfloat16), _attention_backends(plan.device):
            logits = step_model(src, tgt[:, :-1])
        out = label_smoothed_loss(logits, tgt[:, 1:], 0.1, 0)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        optimizer.step()

    start = time.perf_counter()
    for _ in range(plan.warmup):
        step()
    _sync(plan.device)
    warm_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(plan.steps):
        step()
    _sync(plan.device)
    seconds = (time.perf_counter() - start) / plan.steps
    tokens = plan.batch * plan.seq_len
    c = config
    flops = plan.step_flops(c)
    peak = peak_flops(device_name)
    emit(f"gpu train: tokens/s, bf16{' + compile' if plan.compile else ''}, {plan.preset}, {plan.batch} x "
         f"{plan.seq_len}", "target tok/s", tokens / seconds, note=f"{device_name}; warm-up incl. compile "
         f"{warm_s:.0f} s", device=device_name)
    if peak:
        emit("gpu train: model-FLOP utilisation, bf16", "fraction of dense bf16 peak", flops / seconds / peak,
             note=f"{flops / seconds / 1e12:.0f} TFLOP/s of {peak / 1e12:.0f}", device=device_name)
    else:
        emit("gpu train: achieved TFLOP/s, bf16", "TFLOP/s", flops / seconds / 1e12, device=device_name)


def decode(plan: Plan, device_name: str) -> None:
    from scratchformer import ModelConfig, build_model
    from scratchformer.decoding import greedy_decode

    torch.manual_seed(0)
    config = ModelConfig.preset(plan.preset, src_vocab_size=plan.vocab, tgt_vocab_size=plan.vocab, dropout=0.0)
    model = build_model(config).to(plan.device).eval().to(torch.bfloat16)
    for batch in plan.decode_batches:
        src = torch.randint(4, plan.vocab, (batch, plan.seq_len), device=plan.device)
        greedy_decode(model, src, Search(force_len=plan.new_tokens))  # warm-up
        _sync(plan.device)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            greedy_decode(model, src, Search(force_len=plan.new_tokens))
            _sync(plan.device)
            times.append(time.perf_counter() - start)
        seconds = sorted(times)[1]
        emit(f"gpu decode: greedy, bf16, batch {batch}, {plan.new_tokens} new tokens", "tok/s",
             batch * plan.new_tokens / seconds, note=device_name, device=device_name)


if __name__ == "__main__":
    main()

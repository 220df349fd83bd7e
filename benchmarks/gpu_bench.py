#!/usr/bin/env python3
"""paper-base on one CUDA GPU (written for an H200): training throughput and model-FLOP utilisation in bf16
(torch.compile, flash / fused SDPA kernels), and greedy decoding throughput at batch 1 and 64. < 5 minutes.

    .venv/bin/python benchmarks/gpu_bench.py [--steps 30] [--tokens 25000] [--no-compile]

Exits at once with a clear message when CUDA is absent. Prints JSON lines like the CPU benchmarks (benchlib.emit);
MFU = analytic matmul FLOPs (benchlib.transformer_flops) / step time / the GPU's dense bf16 peak (a table of
known GPUs; unknown ones report achieved TFLOP/s only). Batches are unpadded (every sentence L tokens), as the
paper's ~25,000-token batches; our masks are explicit tensors, so SDPA may pick the memory-efficient kernel
where flash takes no mask: the backend list allows flash, memory-efficient and cuDNN attention, never the
math fallback.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import torch
from benchlib import emit, transformer_flops

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

    @property
    def batch(self) -> int:
        return max(1, self.tokens // self.seq_len)

    def step_flops(self, d_model: int = 512, d_ff: int = 2048, layers: int = 6) -> float:
        return transformer_flops(d_model, d_ff, layers, layers, self.vocab, self.batch, self.seq_len, self.seq_len)


def peak_flops(device_name: str) -> float | None:
    """The dense bf16 peak of a GPU named like torch.cuda.get_device_name(), or None when unknown."""
    for key in sorted(BF16_PEAK, key=len, reverse=True):  # "GH200" before "H200"
        if key.lower() in device_name.lower():
            return BF16_PEAK[key]
    return None


def require_cuda() -> None:
    if not torch.cuda.is_available():
        sys.exit(f"gpu_bench.py needs a CUDA GPU, and torch {torch.__version__} sees none on this machine "
                 "(torch.cuda.is_available() is False). For the CPU figures run benchmarks/run_all.py.")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=Plan.steps)
    p.add_argument("--tokens", type=int, default=Plan.tokens)
    p.add_argument("--no-compile", action="store_true")
    args = p.parse_args(argv)
    require_cuda()
    plan = Plan(steps=args.steps, tokens=args.tokens, compile=not args.no_compile)
    torch.backends.cuda.matmul.allow_tf32 = True
    name = torch.cuda.get_device_name()
    train(plan, name)
    decode(plan, name)


def _attention_backends():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION])


def train(plan: Plan, device_name: str) -> None:
    from scratchformer import ModelConfig, build_model
    from scratchformer.training.loss import label_smoothed_loss
    from scratchformer.training.schedule import paper_optimizer

    torch.manual_seed(0)
    config = ModelConfig.preset("paper-base", src_vocab_size=plan.vocab, tgt_vocab_size=plan.vocab)
    model = build_model(config).cuda().train()
    optimizer = paper_optimizer(model.parameters(), lr=1e-4)
    step_model = torch.compile(model) if plan.compile else model
    src = torch.randint(4, plan.vocab, (plan.batch, plan.seq_len), device="cuda")
    tgt = torch.randint(4, plan.vocab, (plan.batch, plan.seq_len + 1), device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16), _attention_backends():
            logits = step_model(src, tgt[:, :-1])
        out = label_smoothed_loss(logits, tgt[:, 1:], 0.1, 0)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        optimizer.step()

    start = time.perf_counter()
    for _ in range(plan.warmup):
        step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(plan.steps):
        step()
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / plan.steps
    tokens = plan.batch * plan.seq_len
    flops = plan.step_flops()
    peak = peak_flops(device_name)
    emit(f"gpu train: tokens/s, bf16{' + compile' if plan.compile else ''}, paper-base, {plan.batch} x "
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
    config = ModelConfig.preset("paper-base", src_vocab_size=plan.vocab, tgt_vocab_size=plan.vocab, dropout=0.0)
    model = build_model(config).cuda().eval().to(torch.bfloat16)
    for batch in plan.decode_batches:
        src = torch.randint(4, plan.vocab, (batch, plan.seq_len), device="cuda")
        greedy_decode(model, src, force_len=plan.new_tokens)  # warm-up
        torch.cuda.synchronize()
        times = []
        for _ in range(3):
            start = time.perf_counter()
            greedy_decode(model, src, force_len=plan.new_tokens)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        seconds = sorted(times)[1]
        emit(f"gpu decode: greedy, bf16, batch {batch}, {plan.new_tokens} new tokens", "tok/s",
             batch * plan.new_tokens / seconds, note=device_name, device=device_name)


if __name__ == "__main__":
    main()

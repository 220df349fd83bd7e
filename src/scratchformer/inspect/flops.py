"""Model FLOPs and model-FLOP utilisation (MFU), as nanoGPT logs it: the matmul work a step needs, over what
the hardware's matmuls can do in that time.

    forward_flops(config, batch, src_len, tgt_len)   matmul FLOPs of one forward pass on a padded batch
    training_flops(config, batch, src_len, tgt_len)  the same for a training step: 3 forwards
    matmul_rate(device, dtype)                       this device's measured (n x n) @ (n x n) rate, FLOP/s

Counted: every Linear (2 FLOPs per multiply-add), Q K^T and A V of every attention, the output layer.
Elementwise work, softmax and LayerNorm are not (the usual MFU convention). A training step is 3 forwards
(the backward pass does twice the forward's matmuls), so 6 x (matmul parameters) x tokens + attention.
"""

from __future__ import annotations

import time

import torch

from scratchformer.config import ModelConfig


def encoder_layer_flops(d: int, d_ff: int, batch: int, length: int) -> float:
    tokens = batch * length
    return 2 * tokens * (4 * d * d + 2 * d * d_ff) + 2 * 2 * batch * length * length * d


def decoder_layer_flops(d: int, d_ff: int, batch: int, tgt_len: int, src_len: int | None) -> float:
    """A decoder layer on (B, L_tgt); with `src_len`, its cross-attention over a (B, L_src) memory too."""
    tt = batch * tgt_len
    flops = 2 * tt * (4 * d * d + 2 * d * d_ff) + 2 * 2 * batch * tgt_len * tgt_len * d  # self-attention + FFN
    if src_len is not None:
        flops += (2 * tt * 2 * d * d  # cross-attention q, o
                  + 2 * batch * src_len * 2 * d * d  # k, v of the memory
                  + 2 * 2 * batch * tgt_len * src_len * d)
    return flops


def forward_flops(c: ModelConfig, batch: int, src_len: int, tgt_len: int = 0) -> float:
    """Matmul FLOPs of one forward pass of any architecture on a padded batch: (B, L_src) [-> (B, L_tgt)].
    A decoder-only or encoder model reads `src_len` as its sequence length."""
    d, d_ff = c.d_model, c.d_ff
    if c.arch == "encoder-decoder":
        return (c.n_encoder_layers * encoder_layer_flops(d, d_ff, batch, src_len)
                + c.n_decoder_layers * decoder_layer_flops(d, d_ff, batch, tgt_len, src_len)
                + 2 * batch * tgt_len * d * c.tgt_vocab_size)
    if c.arch == "decoder":
        return c.n_decoder_layers * decoder_layer_flops(d, d_ff, batch, src_len, None) + \
            2 * batch * src_len * d * c.tgt_vocab_size
    return c.n_encoder_layers * encoder_layer_flops(d, d_ff, batch, src_len)  # heads: a small share, not counted


def training_flops(c: ModelConfig, batch: int, src_len: int, tgt_len: int = 0) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3x forward) on a padded batch."""
    return 3 * forward_flops(c, batch, src_len, tgt_len)


def matmul_rate(device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32, n: int = 1024,
                repeats: int = 5) -> float:
    """This device's matmul rate (FLOP/s) in `dtype`: the best of `repeats` (n x n) @ (n x n) products."""
    device = torch.device(device)
    g = torch.Generator().manual_seed(0)  # its own generator: measuring never moves the training's RNG
    a, b = (torch.randn(n, n, generator=g).to(device=device, dtype=dtype) for _ in range(2))
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    torch.mm(a, b)
    sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        sync()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best

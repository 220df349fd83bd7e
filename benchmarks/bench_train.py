#!/usr/bin/env python3
"""Training throughput: our EncoderDecoder against torch.nn.Transformer, same dimensions, same weights.

    .venv/bin/python benchmarks/bench_train.py [--threads auto|N] [--quick] [--bf16] [--compile]

Both models are paper-base (d_model 512, 6+6 layers, 8 heads, FFN 2048, dropout 0.1 everywhere nn.Transformer
puts it: residuals, attention weights, FFN inside) on a batch of 32 pairs of ~16 source and ~16 target tokens
(random lengths 12-20, right-padded). Around nn.Transformer sit copies of OUR embeddings, output layer and
label-smoothed loss, and both use our `paper_optimizer`, so only the body (attention, FFN, norms) differs.
One step = forward + loss + backward + Adam update. Tokens/s counts real target tokens, as the trainer does.

Model-FLOP utilisation = analytic matmul FLOPs of the step (benchlib.training_flops) / step time / this
machine's float32 matmul rate, measured in the same process with a 2048 x 2048 torch.mm (best of 5, before and
after the timed steps).

--bf16 adds ours under bf16 autocast (TrainConfig.dtype="bf16") against ours in fp32; --compile adds ours under
torch.compile (TrainConfig.compile) against ours eager (the compile time is reported, not timed).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import time

import torch
from benchlib import add_common_args, emit, interleave, log, matmul_flops, median, setup_threads, training_flops
from torch import Tensor, nn

from scratchformer import ModelConfig, build_model
from scratchformer.interop.torch_transformer import to_torch_transformer
from scratchformer.model.embedding import InputLayer
from scratchformer.model.transformer import EncoderDecoder, Generator
from scratchformer.training.loss import label_smoothed_loss
from scratchformer.training.schedule import paper_optimizer

VOCAB = 8000  # the trainer's English BPE size
BATCH, MIN_LEN, MAX_LEN = 32, 12, 20


class TorchTransformerMT(nn.Module):
    """nn.Transformer's body between our input layers and output layer (tied as ours: one vocabulary).

    With `ours`, every weight is a copy of ours (the same function); without, a fresh model of `config`'s sizes
    (bench_memory builds it alone, so that its peak memory holds only the peer)."""

    def __init__(self, config: ModelConfig, ours: EncoderDecoder | None = None) -> None:
        super().__init__()
        c = self.config = config
        self.src_embed, self.tgt_embed = (InputLayer(
            vocab_size=c.tgt_vocab_size, d_model=c.d_model, max_len=c.max_positions, positions=c.positions,
            dropout=c.dropout, pad_id=c.pad_id, scale=c.scale_embeddings) for _ in range(2))
        self.generator = Generator(c.d_model, c.tgt_vocab_size, c.generator_bias)
        if ours is not None:
            self.body = to_torch_transformer(ours)
            for mine, theirs in ((self.tgt_embed, ours.tgt_embed), (self.generator, ours.generator)):
                mine.load_state_dict(theirs.state_dict())
        else:
            self.body = nn.Transformer(c.d_model, c.n_heads, c.n_encoder_layers, c.n_decoder_layers, c.d_ff,
                                       c.dropout, activation=c.activation, layer_norm_eps=c.layer_norm_eps,
                                       batch_first=True, norm_first=c.norm_placement == "pre")
        self.src_embed.token.weight = self.tgt_embed.token.weight
        self.generator.proj.weight = self.tgt_embed.token.weight

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        pad = self.config.pad_id
        src_pad, tgt_pad = src == pad, tgt == pad  # (B, L) True = padding (torch's convention)
        causal = torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool, device=tgt.device).triu(1)  # True = hidden
        hidden = self.body(self.src_embed(src), self.tgt_embed(tgt), tgt_mask=causal, src_key_padding_mask=src_pad,
                           tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad, tgt_is_causal=True)
        return self.generator.logits(hidden)  # (B, L_tgt, V)


def train_config() -> ModelConfig:
    """paper-base with nn.Transformer's final norms and its dropout placement (0.1 on residuals, attention
    weights and inside the FFN), so both compute the same function."""
    return ModelConfig.preset("paper-base", src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, final_norm=True,
                              attention_dropout=0.1, activation_dropout=0.1, max_positions=256)


def build(seed: int = 0) -> tuple[EncoderDecoder, TorchTransformerMT]:
    torch.manual_seed(seed)
    ours = build_model(train_config())
    return ours, TorchTransformerMT(ours.config, ours)


def make_batch(seed: int = 0) -> tuple[Tensor, Tensor]:
    """src (B, L_src) ending in EOS, tgt (B, L_tgt + 1) = BOS ... EOS; random lengths, right-padded with 0."""
    g = torch.Generator().manual_seed(seed)
    src = torch.zeros(BATCH, MAX_LEN, dtype=torch.long)
    tgt = torch.zeros(BATCH, MAX_LEN + 1, dtype=torch.long)
    for b in range(BATCH):
        n, m = (int(torch.randint(MIN_LEN, MAX_LEN + 1, (1,), generator=g)) for _ in range(2))
        src[b, :n] = torch.randint(4, VOCAB, (n,), generator=g)
        src[b, n - 1] = 2
        tgt[b, : m + 1] = torch.randint(4, VOCAB, (m + 1,), generator=g)
        tgt[b, 0], tgt[b, m] = 1, 2
    return src, tgt


def train_step(model: nn.Module, src: Tensor, tgt: Tensor, dtype: torch.dtype | None = None):
    optimizer = paper_optimizer(model.parameters(), lr=1e-4)
    model.train()

    def step() -> float:
        autocast = torch.autocast("cpu", dtype=dtype) if dtype else contextlib.nullcontext()
        with autocast:
            logits = model(src, tgt[:, :-1])  # (B, L_tgt, V), teacher forcing
        out = label_smoothed_loss(logits, tgt[:, 1:], 0.1, 0)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        optimizer.step()
        return float(out.loss.detach())

    return step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p)
    p.add_argument("--bf16", action="store_true", help="also time ours under bf16 autocast")
    p.add_argument("--compile", action="store_true", help="also time ours under torch.compile")
    args = p.parse_args()
    threads = setup_threads(args.threads)
    repeats = args.repeats or (3 if args.quick else 8)
    src, tgt = make_batch()
    tokens = int((tgt[:, 1:] != 0).sum())
    log(f"bench_train: {threads} thread(s), batch {tuple(src.shape)} -> {tuple(tgt[:, 1:].shape)}, {tokens} target "
        f"tokens, {repeats} interleaved rounds")
    peak = matmul_flops(threads)
    ours, peer = build()
    times = interleave({"ours": train_step(ours, src, tgt), "peer": train_step(peer, src, tgt)}, repeats, warmup=2)
    peak = max(peak, matmul_flops(threads))
    t_ours, t_peer = median(times["ours"]), median(times["peer"])
    common = {"threads": threads, "rounds": repeats}
    emit("train: tokens/s, fp32, paper-base 6+6, 32 x ~16 tokens", "target tok/s", tokens / t_ours, tokens / t_peer,
         "torch.nn.Transformer", target_ratio=1.0, note="same weights, embeddings, output layer, loss and Adam",
         times_ours=[round(t, 3) for t in times["ours"]], times_peer=[round(t, 3) for t in times["peer"]], **common)
    c = ours.config
    flops = training_flops(c, BATCH, src.size(1), tgt.size(1) - 1)
    emit("train: model-FLOP utilisation, fp32", "fraction of fp32 matmul rate", flops / t_ours / peak,
         flops / t_peer / peak, "torch.nn.Transformer", target_ours=0.85,
         note=f"{flops / 1e9:.0f} GFLOP/step; matmul rate {peak / 1e9:.0f} GFLOP/s (torch.mm 2048^2, same run)",
         **common)

    if args.bf16:
        ours_bf16 = copy.deepcopy(ours)
        times = interleave({"bf16": train_step(ours_bf16, src, tgt, torch.bfloat16),
                            "fp32": train_step(ours, src, tgt)}, max(3, repeats // 2), warmup=1)
        emit("train: tokens/s, ours bf16 autocast vs ours fp32", "target tok/s", tokens / median(times["bf16"]),
             tokens / median(times["fp32"]), "ours fp32", note="TrainConfig.dtype='bf16'", **common)
    if args.compile:
        start = time.perf_counter()
        compiled = torch.compile(copy.deepcopy(ours))
        step_c = train_step(compiled, src, tgt)
        step_c()
        compile_s = time.perf_counter() - start
        times = interleave({"compiled": step_c, "eager": train_step(ours, src, tgt)}, max(3, repeats // 2), warmup=1)
        emit("train: tokens/s, ours torch.compile vs ours eager", "target tok/s", tokens / median(times["compiled"]),
             tokens / median(times["eager"]), "ours eager", note=f"first step incl. compilation {compile_s:.0f} s",
             **common)


if __name__ == "__main__":
    main()

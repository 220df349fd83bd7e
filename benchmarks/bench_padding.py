#!/usr/bin/env python3
"""How full are the training batches: real tokens / padded tokens, length-bucketed vs random batching.

    .venv/bin/python benchmarks/bench_padding.py

The bundled en-zh training corpus, tokenized as the trainer does (BPE 8000 for English, characters for Chinese;
pairs longer than 128 tokens dropped), batched by `token_batches` at the trainer's budgets (--max-tokens 4096 is
the default and the `long` recipe; 2048 and 1024 for smaller machines) and, as the peer, by `random_batches`
with the same mean number of sentences per batch. `pad_efficiency` counts both sides (source and target).
No timing: the figures do not depend on the machine.
"""

from __future__ import annotations

import argparse
import warnings

from benchlib import emit, log

from scratchformer.config import TrainConfig
from scratchformer.data.batching import encode_pairs, pad_efficiency, random_batches, token_batches
from scratchformer.data.corpus import load_pairs
from scratchformer.data.tokenizers import train_tokenizer


def corpus_lengths(corpus: str = "en-zh") -> list[tuple[int, int]]:
    cfg = TrainConfig(corpus=corpus)
    pairs = load_pairs(corpus, "train")
    src_tok = train_tokenizer(cfg.src_tokenizer, [s for s, _ in pairs], cfg.src_vocab_size, cfg.min_freq)
    tgt_tok = train_tokenizer(cfg.tgt_tokenizer, [t for _, t in pairs], cfg.tgt_vocab_size, cfg.min_freq)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        examples = encode_pairs(pairs, src_tok, tgt_tok, cfg.max_sentence_len)
    return [(len(s), len(t)) for s, t in examples]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default="en-zh")
    p.add_argument("--threads", default=None, help="ignored (no timing here)")
    p.add_argument("--quick", action="store_true", help="ignored (no timing here)")
    p.add_argument("--repeats", default=None, help="ignored (no timing here)")
    args = p.parse_args()
    lengths = corpus_lengths(args.corpus)
    log(f"bench_padding: {len(lengths)} pairs of {args.corpus}")
    default = TrainConfig().max_tokens
    for max_tokens in (default, 2048, 1024):
        bucketed = [b for epoch in range(3) for b in token_batches(lengths, max_tokens, True, seed=1, epoch=epoch)]
        per_batch = round(len(lengths) * 3 / len(bucketed))
        rand = [b for epoch in range(3) for b in random_batches(len(lengths), per_batch, seed=1, epoch=epoch)]
        emit(f"padding: real-token fraction, {args.corpus}, max_tokens {max_tokens}", "fraction",
             pad_efficiency(bucketed, lengths), pad_efficiency(rand, lengths), "random batches, same mean size",
             target_ours=0.90 if max_tokens == default else None,
             note=f"{per_batch} sentences per batch on average; src and tgt counted")


if __name__ == "__main__":
    main()

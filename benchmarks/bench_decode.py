#!/usr/bin/env python3
"""Decoding throughput: ours against Hugging Face MarianMTModel.generate and CTranslate2, the SAME weights.

    .venv/bin/python benchmarks/bench_decode.py [--threads auto|N] [--quick] [--no-cache-figures]

One random paper-base model (d_model 512, 6+6 layers, 8 heads, FFN 2048, vocabulary 8000, Marian's layout:
sinusoid halves, decoder starting from the zero pad embedding) is built by us, written with our
`save_pretrained` as a Marian folder, loaded by transformers, and exported by scratchformer.export.ctranslate2
through CTranslate2's spec API (float32, and int8 at load time); CTranslate2 runs in a child process
(ct2_worker.py says why). All of them
decode the same 16-token sources with the KV cache, forced to exactly 64 new tokens (ours: force_len /
min_len = max_len; HF: min_new_tokens = max_new_tokens; CTranslate2: min_decoding_length =
max_decoding_length), greedy and beam 4, batch 1 and batch 32; every candidate of a setting is timed in one
interleaved loop. Ours decodes as `load_run` prepares it (the layout autotune measures faster); `--int8` is
`quantize_int8`.
Figures: generated tokens/s (batch x 64 / seconds).

Also ours with and without the KV cache (greedy, batch 1) at 64 and 256 new tokens.
"""

from __future__ import annotations

import argparse
import copy
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from benchlib import add_common_args, emit, interleave, log, median, setup_threads
from ct2_worker import CT2Process

from scratchformer import ModelConfig, build_model
from scratchformer.decoding import beam_search, greedy_decode
from scratchformer.decoding.quantize import quantize_int8
from scratchformer.interop.huggingface import save_pretrained
from scratchformer.model.transformer import EncoderDecoder

VOCAB, SRC_LEN, NEW = 8000, 16, 64
PAD, START, EOS = 0, 0, 2  # Marian: the decoder starts from pad
TOKENS = ["<pad>", "<s>", "</s>", "<unk>"] + [f"t{i}" for i in range(4, VOCAB)]


def build_ours(seed: int = 0, max_len: int = 512) -> EncoderDecoder:
    torch.manual_seed(seed)
    config = ModelConfig.preset("paper-base", src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, dropout=0.0,
                                positions="sinusoidal-concat", decoder_start_id=START, max_positions=max_len)
    return build_model(config).eval()


def sources(batch: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (batch, SRC_LEN), generator=g)
    src[:, -1] = EOS
    return src  # (B, L_src)


def ours_fn(model: EncoderDecoder, src: torch.Tensor, beam: int, new: int = NEW,
            use_cache: bool = True) -> Callable[[], object]:
    if beam == 1:
        return lambda: greedy_decode(model, src, force_len=new, bos=START, use_cache=use_cache)
    return lambda: beam_search(model, src, beam_size=beam, min_len=new, max_len=new, bos=START)


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


def ct2_fn(worker: CT2Process, compute_type: str, beam: int) -> tuple[Callable[[], object], int]:
    """One CTranslate2 run in the child process, on the batch last given by `ct2_set`, with the faster of its
    thread options (one timed run each); returns (run, threads)."""

    def run_with(threads: int) -> Callable[[], object]:
        return lambda: worker.request({"run": compute_type, "threads": threads, "beam": beam, "new": NEW})

    trial = interleave({n: run_with(n) for n in worker.thread_options}, repeats=1, warmup=1)
    best = min(trial, key=lambda n: trial[n][0])
    return run_with(best), best


def ct2_set(worker: CT2Process, src: torch.Tensor) -> None:
    worker.request({"set": ct2_tokens(src)})


def check_same_work(ours: EncoderDecoder, hf, src: torch.Tensor) -> None:
    """Same weights, same function: the greedy outputs of ours and Hugging Face agree (and have NEW tokens)."""
    a = greedy_decode(ours, src[:2], force_len=NEW, bos=START)
    b = hf_fn(hf, src[:2], 1)()[:, 1:].tolist()  # HF returns the start token first
    if any(len(x) != NEW for x in a) or a != b:
        log("warning: ours and Hugging Face greedy outputs differ: the comparison may not be like for like")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p)
    p.add_argument("--no-cache-figures", action="store_true", help="skip the with/without KV cache figures")
    args = p.parse_args()
    threads = setup_threads(args.threads)
    repeats = args.repeats or (3 if args.quick else 5)
    common = {"threads": threads, "rounds": repeats}
    ours = build_ours()
    with tempfile.TemporaryDirectory(prefix="sf-bench-decode-") as tmp:
        folder = save_pretrained(ours, Path(tmp) / "marian")
        hf = hf_model(folder)
        try:  # exported here, run in a child process (see ct2_worker.py)
            ct2 = CT2Process(ct2_convert(ours, Path(tmp) / "ct2"), threads)
        except ImportError as e:
            log(f"CTranslate2 unavailable ({e}): `pip install -e '.[bench]'`; its figures are skipped")
            ct2 = None
        ours.inference_layout(measured=True)  # as load_run: column-major only where measured faster
        ours_int8 = quantize_int8(ours)
        check_same_work(ours, hf, sources(2))
        for beam in (1, 4):
            for batch in (1, 32):
                src = sources(batch)
                cands = {"ours": ours_fn(ours, src, beam), "hf": hf_fn(hf, src, beam),
                         "ours_int8": ours_fn(ours_int8, src, beam)}
                if ct2:
                    ct2_set(ct2, src)
                    (cands["ct2"], ct2_threads), (cands["ct2_int8"], ct2_int8_threads) = (
                        ct2_fn(ct2, ct, beam) for ct in ("float32", "int8"))
                log(f"bench_decode: beam {beam}, batch {batch}: {', '.join(cands)} x {repeats} rounds")
                times = interleave(cands, repeats, warmup=1)
                tok_s = {k: batch * NEW / median(v) for k, v in times.items()}
                what = f"{'greedy' if beam == 1 else f'beam {beam}'}, batch {batch}, 64 new tokens"
                raw = {f"times_{k}": [round(t, 3) for t in v] for k, v in times.items()}
                emit(f"decode fp32: {what}", "tok/s", tok_s["ours"], tok_s["hf"], "HF MarianMTModel.generate",
                     target_ratio=1.5, **common, **raw)
                if ct2:
                    emit(f"decode fp32: {what}", "tok/s", tok_s["ours"], tok_s["ct2"], "CTranslate2 float32",
                         target_ratio=1.0 if batch == 32 else None, note=f"CTranslate2: {ct2_threads} thread(s)",
                         **common)
                    emit(f"decode int8: {what}", "tok/s", tok_s["ours_int8"], tok_s["ct2_int8"], "CTranslate2 int8",
                         target_ratio=0.8, **common, note="ours: quantize_int8 (dynamic, per-channel); "
                         f"CTranslate2: {ct2_int8_threads} thread(s)")
        if ct2:
            ct2.close()
        if not args.no_cache_figures:
            cache_figures(ours, max(2, repeats - 2 if args.quick else repeats - 2), common)


def cache_figures(ours: EncoderDecoder, repeats: int, common: dict) -> None:
    src = sources(1)
    for new in (64, 256):
        model = copy.deepcopy(ours)
        times = interleave({"cache": ours_fn(model, src, 1, new), "no_cache": ours_fn(model, src, 1, new, False)},
                           repeats, warmup=1)
        t_c, t_n = median(times["cache"]), median(times["no_cache"])
        emit(f"decode fp32: KV cache vs none, greedy, batch 1, {new} new tokens", "tok/s", new / t_c, new / t_n,
             "ours without cache", target_ratio=4.0 if new == 256 else None, **common)


if __name__ == "__main__":
    main()

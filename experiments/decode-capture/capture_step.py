#!/usr/bin/env python3
"""A captured decode step over a static per-layer KV cache, eager against torch.compile variants, step by step.

    PYTHONPATH=src .venv/bin/python experiments/decode-capture/capture_step.py [--run-dir models/en-zh]
        [--rows 1,4,32,128] [--modes eager,inductor,freezing,freezing-autotune,aoti] [--steps 200] [--repeats 5]
        [--out experiments/decode-capture/capture_step.jsonl]

The step (gpt-fast / Hugging Face StaticCache layout): one preallocated (N, h, C, d) key and value tensor per
decoder layer, written in place with `index_copy_` at the step's position, and a self-attention mask
`arange(C) <= pos`, so every step has the same shapes and nothing recompiles; the encoder keys/values are
projected once, the source padded to a multiple of 16. Rows N stand for sentences x beams; a beam reorder would be
an index_select of the caches outside the graph. For each row count and mode: the first call's cost (compile),
the median us per step over `--repeats` interleaved rounds of `--steps` steps, and the largest |logit
difference| from the modules' own cached step (model.decoder with a DecoderCache) at every position.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from scratchformer.decoding.fast_step import LeanDecoder
from scratchformer.model.transformer import EncoderDecoder
from scratchformer.runs import load_run

ROOT = Path(__file__).resolve().parents[2]


class StaticStep(nn.Module):
    """One decoding step of a post-norm, LayerNorm, ReLU/any-FFN encoder-decoder over static caches (buffers)."""

    def __init__(self, model: EncoderDecoder, rows: int, capacity: int, memory: Tensor, src_mask: Tensor) -> None:
        super().__init__()
        c = model.config
        self.model, self.h, self.d, self.cap = model, c.n_heads, c.head_dim_k, capacity
        s = -(-memory.size(1) // 16) * 16  # source length padded to a multiple of 16
        pad = s - memory.size(1)
        memory = F.pad(memory, (0, 0, 0, pad))
        mask = F.pad(src_mask, (0, pad), value=False)  # (N, 1, 1, S)
        self.register_buffer("src_mask", mask, persistent=False)
        self.register_buffer("positions", torch.arange(capacity), persistent=False)
        for i, layer in enumerate(model.decoder.layers):
            k, v = layer.cross_attn._project_kv(memory)  # (N, h, S, d)
            self.register_buffer(f"ck{i}", k.contiguous(), persistent=False)
            self.register_buffer(f"cv{i}", v.contiguous(), persistent=False)
            self.register_buffer(f"sk{i}", torch.zeros(rows, self.h, capacity, self.d), persistent=False)
            self.register_buffer(f"sv{i}", torch.zeros(rows, self.h, capacity, self.d), persistent=False)

    def forward(self, tok: Tensor, pos: Tensor) -> Tensor:
        # tok (N, 1) the newest tokens; pos (1,) long, the step's position -> logits (N, V)
        m, n, h, d = self.model, tok.size(0), self.h, self.d
        x = m.tgt_embed.token(tok) + m.tgt_embed.position(pos[None, :])  # (N, 1, D)
        self_mask = (self.positions <= pos)[None, None, None, :]  # (1, 1, 1, C)
        for i, layer in enumerate(m.decoder.layers):
            sa, ca, ffn = layer.self_attn, layer.cross_attn, layer.feed_forward
            n0, n1, n2 = (s.norm for s in layer.sublayer)
            q, k, v = F.linear(x, sa.w_qkv.weight, sa.w_qkv.bias).view(n, 1, 3, h, d).permute(2, 0, 3, 1, 4).unbind(0)
            sk, sv = getattr(self, f"sk{i}"), getattr(self, f"sv{i}")
            sk.index_copy_(2, pos, k)
            sv.index_copy_(2, pos, v)
            y = F.scaled_dot_product_attention(q, sk, sv, attn_mask=self_mask)  # (N, h, 1, d)
            y = F.linear(y.transpose(1, 2).reshape(n, 1, h * d), sa.w_o.weight, sa.w_o.bias)
            x = F.layer_norm(x + y, x.shape[-1:], n0.weight, n0.bias, n0.eps)
            q = F.linear(x, ca.w_q.weight, ca.w_q.bias).view(n, 1, h, d).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, getattr(self, f"ck{i}"), getattr(self, f"cv{i}"),
                                               attn_mask=self.src_mask)
            y = F.linear(y.transpose(1, 2).reshape(n, 1, h * d), ca.w_o.weight, ca.w_o.bias)
            x = F.layer_norm(x + y, x.shape[-1:], n1.weight, n1.bias, n1.eps)
            y = F.linear(ffn.activation(F.linear(x, ffn.w_1.weight, ffn.w_1.bias)), ffn.w_2.weight, ffn.w_2.bias)
            x = F.layer_norm(x + y, x.shape[-1:], n2.weight, n2.bias, n2.eps)
        return F.linear(x[:, 0], m.generator.proj.weight, m.generator.proj.bias)  # (N, V)


def reference_logits(model: EncoderDecoder, memory: Tensor, src_mask: Tensor, toks: Tensor) -> list[Tensor]:
    """The modules' cached step at every position of toks (N, T)."""
    cache = model.new_cache()
    out, mem = [], memory
    for t in range(toks.size(1)):
        x = model.tgt_embed(toks[:, t : t + 1], offset=t)
        hidden = model.decoder(x, mem, None, src_mask, cache)
        mem = None
        out.append(model.generator.logits(hidden[:, -1]))
    return out


class LeanAt:
    """The shipped eager step (decoding/fast_step.py over the growing DecoderCache) as (tok, pos) -> logits: the
    cache is rolled back to `pos` after each call, so repeated calls time the same position as StaticStep's."""

    def __init__(self, model: EncoderDecoder, memory: Tensor, src_mask: Tensor, toks: Tensor, pos: int) -> None:
        self.model, self.lean, self.src_mask = model, LeanDecoder.for_model(model), src_mask
        self.cache, memory = model.new_cache(), memory
        for t in range(pos):  # fill positions 0 .. pos-1
            self.lean(self.lean.embed(toks[:, t : t + 1], t), memory, src_mask, self.cache)
            memory = None

    def __call__(self, tok: Tensor, pos: Tensor) -> Tensor:
        p = int(pos)
        for c in self.cache.self_attn:
            c.length = p
        hidden = self.lean(self.lean.embed(tok, p), None, self.src_mask, self.cache)
        return self.model.generator.logits(hidden[:, -1])


def build(mode: str, step: StaticStep, example: tuple[Tensor, Tensor], workdir: Path):
    """The callable for `mode`; torch.compile variants compile lazily (the first call pays)."""
    import torch._inductor.config as ic
    if mode == "eager":
        return step
    ic.freezing = mode.startswith("freezing") or mode == "aoti"
    if mode == "aoti":
        ep = torch.export.export(step, example)
        path = torch._inductor.aoti_compile_and_package(ep, package_path=str(workdir / f"step_{os.getpid()}.pt2"))
        return torch._inductor.aoti_load_package(path)
    kwargs = {"mode": "max-autotune-no-cudagraphs"} if mode.endswith("autotune") else {}
    return torch.compile(step, fullgraph=True, dynamic=False, **kwargs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run-dir", type=Path, default=ROOT / "models" / "en-zh")
    p.add_argument("--rows", default="1,32")
    p.add_argument("--modes", default="eager,lean,inductor,freezing,freezing-autotune,aoti")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--src-len", type=int, default=23)
    p.add_argument("--capacity", type=int, default=80)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path(__file__).with_name("capture_step.jsonl"))
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    model = load_run(args.run_dir).model.eval()
    v = model.config.tgt_vocab_size
    workdir = Path(os.environ.get("TMPDIR", "/tmp"))
    for rows in (int(r) for r in args.rows.split(",")):
        with torch.no_grad():
            g = torch.Generator().manual_seed(rows)
            src = torch.randint(4, model.config.src_vocab_size, (rows, args.src_len), generator=g)
            src_mask = model.src_mask(src)
            memory = model.encode(src, src_mask)
            toks = torch.randint(4, v, (rows, args.capacity), generator=g)
            ref = reference_logits(model, memory, src_mask, toks)
        steps, fns, first = {}, {}, {}
        for mode in args.modes.split(","):
            torch._dynamo.reset()  # each mode compiles afresh (inductor's config is not part of dynamo's guards)
            with torch.no_grad():  # not inference_mode: export (AOTInductor) refuses inference tensors as buffers
                steps[mode] = StaticStep(model, rows, args.capacity, memory.clone(), src_mask.clone())
            start = time.perf_counter()
            if mode == "lean":  # the shipped eager step: timed only (it is the modules' numbers, tests/perf)
                with torch.no_grad():
                    fns[mode], first[mode] = LeanAt(model, memory, src_mask, toks, args.capacity // 2), 0.0
                continue
            try:
                fn = build(mode, steps[mode], (toks[:, :1], torch.tensor([0])), workdir)
                with torch.no_grad():
                    fn(toks[:, :1], torch.tensor([0]))
            except Exception as e:  # noqa: BLE001 (a study: record why a mode failed)
                print(json.dumps({"rows": rows, "mode": mode, "error": f"{type(e).__name__}: {str(e)[:300]}"}))
                continue
            fns[mode], first[mode] = fn, time.perf_counter() - start
        diffs = {}
        with torch.no_grad():
            for mode, fn in fns.items():
                if mode == "lean":
                    diffs[mode] = None
                    continue
                # positions are written in order from 0 and the mask hides the rest: no reset needed
                diffs[mode] = max(float((fn(toks[:, t : t + 1], torch.tensor([t])) - ref[t]).abs().max())
                                  for t in range(args.capacity))
            times: dict[str, list[float]] = {m: [] for m in fns}
            names = list(fns)
            pos = torch.tensor([args.capacity // 2])
            for r in range(args.repeats):
                for mode in names if r % 2 == 0 else names[::-1]:
                    fn, tok = fns[mode], toks[:, :1]
                    start = time.perf_counter()
                    for _ in range(args.steps):
                        fn(tok, pos)
                    times[mode].append((time.perf_counter() - start) / args.steps)
        base = statistics.median(times["eager"]) if "eager" in times else None
        for mode in fns:
            us = 1e6 * statistics.median(times[mode])
            row = {"rows": rows, "mode": mode, "us_per_step": round(us, 1),
                   "speedup_vs_eager": round(1e6 * base / us, 3) if base else None,
                   "first_call_s": round(first[mode], 2), "max_abs_logit_diff": diffs[mode],
                   "capacity": args.capacity, "src_len": args.src_len, "threads": args.threads,
                   "torch": torch.__version__, "load": [round(x, 2) for x in os.getloadavg()]}
            print(json.dumps(row), flush=True)
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()

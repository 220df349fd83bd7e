"""The decoder's cached step compiled ahead of use (AOTInductor): the lean step (fast_step.py) as one pure graph over
a static KV cache, with no Python between its kernels.

    step = StaticStep.for_model(model, beam)       # None when fast_step.py's lean step does not cover the model
    path = compile_step(step, package_path, prepack=False)  # torch.export + AOTInductor, frozen weights: ~20 s
    tuned = compile_step(step, other_path, tuned=True)  # max-autotune's C++ micro-GEMMs where they time faster: ~1 min
    most = rows_served({rows: {"tuned": s, "any": s2}, ...})  # the rows up to which the tuned one ran faster here
    fn = by_rows(load_step(tuned), load_step(path), most)  # the tuned package up to `most` rows, the other above
    enc = load_step(compile_encoder(StaticEncoder(model), encoder_path))  # the encoder + cross k/v: ~12 s once
    steps = CapturedSteps(model, CapturedDecoder(fn, enc), src, src_mask, capacity, beam)  # Seq2SeqSteps' contract

The static cache (gpt-fast's, Hugging Face's StaticCache): one preallocated (N, h, C, d) key and value tensor per
decoder layer, which the graph writes in place with `index_copy_` at the step's position; the new row attends to
the positions `arange(C) <= pos`, so every step has the same shapes. Rows N, the source length S and the capacity C
are dynamic dimensions of one package (beams per sentence, G, is fixed per package); a beam reorder is a reorder of
an (N, C) index the graph reads the caches through, and sentences dropping out move cache rows outside the graph,
so nothing recompiles. The encoder's keys and values are inputs, not constants: one package serves every sentence.
They come from the encoder's package (StaticEncoder: the encoder with the decoder's cross-attention projections;
dynamic batch and source length), or from the modules where it was not compiled. Packed or plain weights
(compile_step's `prepack`) are the torch engine's measured choice.

What chooses it (`step: auto | eager | captured`, config/decoding.py), where packages are cached and how they are
keyed is the torch engine's business (engines/torch_engine.py); this file builds, compiles, loads, runs and times
the step. The logits are the lean step's to about 1e-5 (attention over the masked capacity sums in another order);
tests/perf/test_captured_step.py holds the tokens equal for greedy and beam search.
"""

from __future__ import annotations

import shutil
import sysconfig
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils import _pytree as pytree

from scratchformer.decoding.common import Seq2SeqSteps
from scratchformer.decoding.compile_home import inductor_home
from scratchformer.decoding.fast_step import LeanDecoder, _hooked
from scratchformer.errors import N_
from scratchformer.model.transformer import EncoderDecoder, check_ids

START = 16  # positions a static cache holds at first
GROW = 8  # positions it gains when full: each step's attention reads every slot, so slack costs a read per step
SMALL_ROWS = 4  # most rows the tuned package serves in greedy search until rows_served measured it here (beams:
#                 one sentence): on an EPYC (fp32) 1.44x the other at 4 rows, 0.87x at 8
MIN_ROWS = 2  # torch.export specialises a dimension seen as 1: the example has 2 sentences (and 16 positions)

StepPackage = Callable[..., Tensor]  # a loaded step package (load_step): flat inputs -> logits
EncoderPackage = Callable[..., Sequence[Tensor]]  # a loaded encoder package: (src, src_mask) -> cross keys/values


def unavailable(model: nn.Module) -> str | None:
    """Why the captured step cannot serve `model` here (no C++ compiler, a part the lean step does not cover), or
    None when it can."""
    if not compiler_available():
        return N_("no C++ compiler")
    if not isinstance(model, EncoderDecoder) or StaticStep.for_model(model) is None:
        return N_("the model has a part the lean step does not cover (rope, GQA, RMSNorm, hooks ...)")
    if next(model.parameters()).device.type != "cpu":
        return N_("not on the CPU")
    return None


def compiler_available() -> bool:
    """Whether a C++ compiler is on PATH (AOTInductor writes and builds C++); without one the eager step runs."""
    return shutil.which(sysconfig.get_config_var("CXX") or "c++") is not None or shutil.which("g++") is not None


def attend(q: Tensor, k: Tensor, v: Tensor, visible: Tensor, sums: bool = False) -> Tensor:
    """softmax(q k^T / sqrt(d), where visible) v, written out: inductor fuses it into its own kernels, where
    F.scaled_dot_product_attention stays a call out of the graph (1.3-1.4x the whole step at 1 and at 32 rows,
    experiments/decode-capture/step_packages.py of e832339). q (N, h, Q, d), k/v (N, h, K, d), visible bool broadcast to
    (N, h, Q, K), every query with at least one visible key.

    sums: the two products as broadcast multiplies summed over d and over K rather than `@`. With one query (greedy,
    a beam's own history) inductor turns `@` into those loops anyway. With the G queries of a beam's cross-attention
    it calls ATen's bmm, ~30 us a call on these shapes, where the sums fuse into its own loops: the tuned package's
    beam-4 step ran 1.6x faster at one sentence with them (bf16, 1 or 2 threads); at 32 sentences with 2 threads
    ATen's bmm, which uses both cores, was 7-10% faster (docs/performance.md). So the tuned package (few rows,
    single-threaded kernels) writes sums, the package for any rows `@`, and rows_served picks between them."""
    products = (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1) if sums else q @ k.transpose(-2, -1)  # (N, h, Q, K)
    weights = torch.softmax((products * q.size(-1) ** -0.5).masked_fill(~visible, float("-inf")), dim=-1)
    return (weights.unsqueeze(-1) * v.unsqueeze(-3)).sum(-2) if sums else weights @ v  # (N, h, Q, d)


class StaticStep(nn.Module):
    """One decoding step over static per-layer caches: (tok, pos, src_mask, [beams,] *cross k/v, *self k/v) -> logits.

    tok (N, 1) the newest ids; pos (1,) long, their position; src_mask (B, 1, 1, S) bool with N = B * beam;
    cross k/v (B, h, S, d) per layer, the encoder's projected keys/values; self k/v (N, h, C, d) per layer, written
    in place at `pos`. The weights are the model's own (frozen into the package when compiled).

    With beams (width G > 1), a beam reorder copies no cache: row r writes its new key/value into its own row, and
    `beams` (N, C) long says which beam of r's sentence holds r's key/value at each earlier position (fairseq and
    CTranslate2 gather the whole cache instead, each step). The step reads them through that index, inside the
    attention's own loop; the caller reorders only `beams` (N x C ids, not N x h x C x d floats)."""

    def __init__(self, model: EncoderDecoder, lean: LeanDecoder, beam: int, sums: bool = False) -> None:
        super().__init__()
        self.model, self.lean, self.beam = model, lean, beam
        self.sums = sums  # attend's products as sums (the tuned package) or `@`
        self.h, self.d, self.n_layers = lean.h, lean.d, len(lean.layers)

    @staticmethod
    def for_model(model: EncoderDecoder, beam: int = 1) -> StaticStep | None:
        lean = LeanDecoder.for_model(model)
        if lean is None or lean.embedding is None:
            return None
        return StaticStep(model, lean, beam)

    def forward(self, tok: Tensor, pos: Tensor, src_mask: Tensor, *inputs: Tensor) -> Tensor:
        lean, h, d, g = self.lean, self.h, self.d, self.beam
        n_layers = self.n_layers
        beams, caches = (inputs[0], inputs[1:]) if g > 1 else (None, inputs)
        cross, selfs = caches[: 2 * n_layers], caches[2 * n_layers :]
        n, capacity = tok.size(0), selfs[0].size(2)
        weight, scale, position = lean.embedding
        x = F.embedding(tok, weight) * scale + position.index_select(0, pos)  # (N, 1, D)
        slots = torch.arange(capacity, device=tok.device)  # (C,)
        visible = (slots <= pos)[None, None, None, :]  # (1, 1, 1, C)
        if beams is not None:  # (N, C): the cache row holding row r's key/value at each position; its own at pos
            rows = torch.arange(n, device=tok.device)[:, None]  # (N, 1)
            holder = torch.where(slots == pos, rows, rows - rows % g + beams)  # (N, C)

        def self_attn(y: Tensor, a: nn.Module, sk: Tensor, sv: Tensor) -> Tensor:
            q, k, v = a.w_qkv.forward(y).view(n, 1, 3, h, d).permute(2, 0, 3, 1, 4).unbind(0)  # (N, h, 1, d)
            sk.index_copy_(2, pos, k)  # in place: the caller's cache tensors are the graph's inputs
            sv.index_copy_(2, pos, v)
            if beams is not None:  # each row's own history, gathered where the attention reads it
                sk = sk.transpose(1, 2)[holder, slots].transpose(1, 2)  # (N, h, C, d)
                sv = sv.transpose(1, 2)[holder, slots].transpose(1, 2)
            out = attend(q, sk, sv, visible, self.sums)  # (N, h, 1, d)
            return a.w_o.forward(out.transpose(1, 2).reshape(n, 1, h * d))

        def cross_attn(y: Tensor, a: nn.Module, ck: Tensor, cv: Tensor) -> Tensor:
            q = a.w_q.forward(y).view(n, 1, h, d).transpose(1, 2)  # (N, h, 1, d)
            if g > 1:  # the G rows of a sentence attend as G queries of its one memory row
                q = q.reshape(n // g, g, h, 1, d).transpose(1, 2).reshape(n // g, h, g, d)
            out = attend(q, ck, cv, src_mask, self.sums)  # (B, h, G, d)
            if g > 1:
                out = out.reshape(n // g, h, g, 1, d).transpose(1, 2).reshape(n, h, 1, d)
            return a.w_o.forward(out.transpose(1, 2).reshape(n, 1, h * d))

        for i, layer in enumerate(lean.layers):
            norms = layer.sublayer
            x = lean._sub(x, norms[0].norm, self_attn, layer.self_attn, selfs[2 * i], selfs[2 * i + 1])
            x = lean._sub(x, norms[1].norm, cross_attn, layer.cross_attn, cross[2 * i], cross[2 * i + 1])
            x = lean._sub(x, norms[2].norm, layer.feed_forward.forward)
        if lean.final is not None:
            f = lean.final
            x = F.layer_norm(x, x.shape[-1:], f.weight, f.bias, f.eps)
        return self.model.generator.logits(x[:, 0])  # (N, V)

    def example(self, sentences: int = MIN_ROWS, src_len: int = 16, capacity: int = 16) -> tuple[Tensor, ...]:
        """Inputs of the right kinds for export: every dynamic dimension > 1 so none is specialised."""
        p = next(self.model.parameters())
        n, h, d = sentences * self.beam, self.h, self.d
        cross = [torch.zeros(sentences, h, src_len, d, dtype=p.dtype) for _ in range(2 * self.n_layers)]
        selfs = [torch.zeros(n, h, capacity, d, dtype=p.dtype) for _ in range(2 * self.n_layers)]
        mask = torch.ones(sentences, 1, 1, src_len, dtype=torch.bool)
        beams = [torch.zeros(n, capacity, dtype=torch.long)] if self.beam > 1 else []
        return (torch.ones(n, 1, dtype=torch.long), torch.tensor([1]), mask, *beams, *cross, *selfs)

    def dynamic_shapes(self) -> tuple:
        """Rows (sentences x beam), source length and capacity dynamic."""
        dim = torch.export.Dim
        b, s, c = dim("sentences", min=1, max=4096), dim("src_len", min=1, max=4096), dim("capacity", min=2, max=4096)
        n = b * self.beam if self.beam > 1 else b
        cross = [{0: b, 2: s}] * (2 * self.n_layers)
        selfs = [{0: n, 2: c}] * (2 * self.n_layers)
        beams = [{0: n, 1: c}] if self.beam > 1 else []
        return ({0: n}, None, {0: b, 3: s}, (*beams, *cross, *selfs))  # *inputs: one tuple


def compile_step(step: StaticStep, package_path: Path, tuned: bool = False, prepack: bool = True) -> Path:
    """torch.export the step (dynamic rows / source length / capacity), then AOTInductor with frozen weights into
    `package_path` (.pt2). prepack: weights re-laid for MKL's / oneDNN's packed GEMMs (`cpp.weight_prepack`);
    False: plain GEMMs on the frozen weights (the engine's measured rule).

    tuned: every Linear an inductor C++ micro-GEMM (AMX / AVX-512 kernels, blocking picked by max-autotune at the
    example's rows), and every kernel single-threaded (`cpp.threads` 1: no OpenMP region to open per kernel), where
    the other package calls MKL / oneDNN. It serves the rows where it times faster (rows_served, by_rows): on a
    2-core Xeon with AMX, 2.6x the other at 1 row and 1.3-1.5x at 32 in bf16 (with 1 or 2 threads), 1.8x at 1 row
    in fp32. Letting max-autotune pick ATen's GEMM per Linear instead (it times each alone, at the process's
    threads) chose oneDNN for most of them with 2 threads, and that step ran 2.3x slower at 1 row. A GEMM the C++
    template cannot take (NoValidChoicesError) makes the compile retry with ATen among the choices. The tuned package's
    attention is written as sums, the other's with `@` (attend)."""
    configs: dict[str, object] = {"freezing": True, "cpp.weight_prepack": prepack or tuned}
    if tuned:
        configs.update({"max_autotune": True, "max_autotune_gemm_backends": "CPP", "cpp.threads": 1,
                        "autotune_num_choices_displayed": 0})  # its timing tables on stderr: the caller says one line
        if hasattr(torch._inductor.config, "max_autotune_report_choices_stats"):  # its "Autotune Choices Stats"
            configs["max_autotune_report_choices_stats"] = False
    with inductor_home(), torch.no_grad(), warnings.catch_warnings():  # not inference_mode: export refuses those
        # inductor's own use of a deprecated torch API, on a cold compile: not the user's concern
        warnings.filterwarnings("ignore", message="TypedStorage is deprecated")
        graph = StaticStep(step.model, step.lean, step.beam, sums=tuned)  # attend's form: its docstring
        exported = torch.export.export(graph, step.example(), dynamic_shapes=step.dynamic_shapes())
        try:
            path = torch._inductor.aoti_compile_and_package(exported, package_path=str(package_path),
                                                            inductor_configs=configs)
        except Exception as e:
            if not tuned or "No choices to select" not in str(e):
                raise
            configs["max_autotune_gemm_backends"] = "CPP,ATEN"  # a GEMM the template does not cover: ATen's
            path = torch._inductor.aoti_compile_and_package(exported, package_path=str(package_path),
                                                            inductor_configs=configs)
    return Path(path)


def cross_kv(model: EncoderDecoder, src: Tensor, src_mask: Tensor) -> list[Tensor]:
    """Per decoder layer the keys and the values (B, h, L, d) its cross-attention reads for src (B, L), through the
    modules: what StaticEncoder compiles, and what runs where its package does not."""
    memory = model.encoder(model.src_embed(src), src_mask)  # (B, L, D)
    return [t.contiguous() for layer in model.decoder.layers for t in layer.cross_attn._project_kv(memory)]


class StaticEncoder(nn.Module):
    """The encoder and the decoder's cross-attention projections as one graph: (src (B, L) ids, src_mask (B, 1, 1, L)
    bool) -> per decoder layer the keys and the values (B, h, L, d) its cross-attention reads, 2 x layers tensors.
    What the modules do once per sentence before the first step (model.encode, then each layer's _project_kv)."""

    def __init__(self, model: EncoderDecoder) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, ...]:
        return tuple(cross_kv(self.model, src, src_mask))

    def example(self) -> tuple[Tensor, Tensor]:
        src = torch.full((MIN_ROWS, 16), 4, dtype=torch.long)
        return src, torch.ones(MIN_ROWS, 1, 1, 16, dtype=torch.bool)

    def dynamic_shapes(self) -> tuple:
        dim = torch.export.Dim
        b = dim("sentences", min=1, max=4096)
        n = dim("src_len", min=2, max=max(self.model.config.max_positions, 17))  # a length seen as 1 would specialise
        return ({0: b, 1: n}, {0: b, 3: n})


def compile_encoder(encoder: StaticEncoder, package_path: Path, prepack: bool = True) -> Path:
    """compile_step's for the encoder (dynamic batch and source length): 1.6-2.0x the modules for one sentence of
    12-40 tokens, 1.16x for 32 of 30 (experiments/decode-capture of e832339); max-autotune measured no faster."""
    with inductor_home(), torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TypedStorage is deprecated")
        exported = torch.export.export(encoder, encoder.example(), dynamic_shapes=encoder.dynamic_shapes())
        configs = {"freezing": True, "cpp.weight_prepack": prepack}
        path = torch._inductor.aoti_compile_and_package(exported, package_path=str(package_path),
                                                        inductor_configs=configs)
    return Path(path)


def by_rows(small: Callable[..., Tensor] | None, large: Callable[..., Tensor], most: int | None
            ) -> Callable[..., Tensor]:
    """One step from two packages of the same step: `small` (compiled `tuned`) for calls of at most `most` rows
    (None: every call), `large` for more; `large` alone where there is no `small` or it serves no row count."""
    if small is None or most == 0:
        return large
    if most is None:
        return small

    def step(tok: Tensor, *rest: Tensor) -> Tensor:
        return (small if tok.size(0) <= most else large)(tok, *rest)

    return step


def rows_served(seconds: dict[int, dict[str, float]]) -> int | None:
    """The most rows the tuned package should serve, from both packages' seconds per row count ({rows: {"tuned": s,
    "any": s}}, interleaved timings of the same work): the largest count up to which it was faster at every count
    timed; None (every count) where it was faster at all of them, 0 where it lost at the smallest."""
    most = 0
    for rows in sorted(seconds):
        if seconds[rows]["tuned"] >= seconds[rows]["any"]:
            return most
        most = rows
    return None


def load_step(package_path: Path) -> Callable[..., Tensor]:
    """The compiled step of a package written by compile_step: its loader's `boxed_run` on the flat inputs, where the
    package's own `__call__` re-reads its input/output specs (JSON) and flattens the arguments on every call, 20-60 us
    a step (a fifth of a one-row step). The inputs are already flat tensors in the exported order; a package of one
    output (the step) returns that tensor, one of several (the encoder's) their list. A torch whose package object
    lacks that loader gets the package's own call."""
    with inductor_home(unpack=True):  # its own folder, removed once loaded; the loader's vector-ISA check too
        compiled = torch._inductor.aoti_load_package(str(package_path))
    loader = getattr(compiled, "loader", None)
    if loader is None or not hasattr(loader, "boxed_run") or not hasattr(loader, "get_call_spec"):
        return compiled
    out_spec = pytree.treespec_loads(loader.get_call_spec()[1])
    run = loader.boxed_run
    if out_spec.num_leaves == 1:

        def step(*inputs: Tensor) -> Tensor:
            return run(list(inputs))[0]  # a fresh list: the boxed convention may consume it

        return step

    def several(*inputs: Tensor) -> Sequence[Tensor]:
        return run(list(inputs))  # the encoder's 2 x layers tensors, in order

    return several


@dataclass
class CapturedDecoder:
    """What the torch engine hands a search: the compiled step (by_rows) and, where it was compiled, the encoder with
    the cross-attention projections (StaticEncoder)."""

    step: Callable[..., Tensor]
    encoder: Callable[..., Sequence[Tensor]] | None = None

    def cross(self, model: EncoderDecoder, src: Tensor, src_mask: Tensor) -> list[Tensor]:
        """Per decoder layer the cross-attention keys and values (B, h, L, d) for src (B, L): the compiled encoder's,
        or the modules' (no encoder package, a 1-token source, a hook on the encoder that must see its call)."""
        check_ids(src, model.config.src_vocab_size, model.config.max_positions, "src")
        if self.encoder is not None and src.size(1) >= 2 and not _hooked([model.src_embed, model.encoder]):
            return list(self.encoder(src.contiguous(), src_mask.contiguous()))
        return cross_kv(model, src, src_mask)


class CapturedSteps:
    """Seq2SeqSteps' step function (common.py: `(tokens (N, t), index) -> logits (N, V)`, `row_sentences()`) over a
    compiled StaticStep: the static caches live here, and `index` is applied to them outside the graph."""

    def __init__(self, model: EncoderDecoder, captured: CapturedDecoder, src: Tensor, src_mask: Tensor,
                 capacity: int, beam: int = 1) -> None:
        c = model.config
        self.step, self.beam = captured.step, beam
        self.cross = captured.cross(model, src, src_mask)  # per layer k, v (B, h, S, d): once per sentence
        kv = self.cross[0]  # (B, h, S, d): its rows, dtype and device
        self.src_mask = src_mask.contiguous()  # AOTInductor reads its inputs as contiguous: no strided views
        # The capacity starts small and grows by GROW slots when full (a dynamic dimension: no recompile), so that
        # each step's attention reads about the filled part rather than the length limit's worth of positions
        # (doubling instead: 2-3% slower at batch 32, RESULTS.md). Zeros, not empty: masked positions still enter
        # the attention's sums (as -inf), and garbage may be NaN.
        rows, shape = kv.size(0) * beam, (c.n_heads, min(max(capacity, 2), START), c.head_dim_k)
        self.selfs = [kv.new_zeros(rows, *shape) for _ in range(2 * c.n_decoder_layers)]  # the step writes them
        self.positions = torch.arange(max(capacity, 2), device=kv.device)
        self.sents = torch.arange(kv.size(0), device=kv.device)
        self.length = 0  # positions filled
        # with beams: which beam of its sentence holds each row's key/value per position (StaticStep's docstring)
        self.beams = kv.new_zeros(rows, shape[1], dtype=torch.long) if beam > 1 else None
        self.row_ids = torch.arange(rows, device=kv.device)
        self.own = self.row_ids % beam  # each row's own beam

    def __enter__(self) -> CapturedSteps:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def row_sentences(self) -> Tensor:
        return self.sents.repeat_interleave(self.beam) if self.beam > 1 else self.sents

    def __call__(self, tokens: Tensor, index: Tensor | None = None) -> Tensor:
        if index is not None:
            self._select(index)
        t = tokens.size(1) - 1  # the newest token's position
        if t >= self.selfs[0].size(2):
            self._grow(self.selfs[0].size(2) + GROW)
        beams = [] if self.beams is None else [self.beams]
        logits = self.step(tokens[:, -1:].contiguous(), self.positions[t : t + 1], self.src_mask, *beams,
                           *self.cross, *self.selfs)
        if self.beams is not None:  # row r wrote position t into its own cache row
            self.beams[:, t] = self.own[: self.beams.size(0)]
        self.length = t + 1
        return logits.float()  # a bf16 package's logits: the search's sums in fp32 (a no-op for fp32)

    def _grow(self, capacity: int) -> None:
        n, rows = self.length, self.selfs[0].size(0)
        grown = [c.new_zeros(rows, c.size(1), capacity, c.size(3)) for c in self.selfs]  # rows never grow back
        for old, new in zip(self.selfs, grown):
            new[:, :, :n] = old[:, :, :n]
        self.selfs = grown
        if self.beams is not None:
            beams = self.beams.new_zeros(rows, capacity)
            beams[:, :n] = self.beams[:, :n]
            self.beams = beams

    def _select(self, index: Tensor) -> None:
        """Rows `index` of the search (beams reordered, finished sentences out). Greedy: those rows of the caches.
        Beams: `beams` reordered alone while every sentence stays; when sentences finish, the caches keep the rows of
        the others (_keep)."""
        g = self.beam
        shrink = index.numel() < self.selfs[0].size(0)
        if self.beams is not None:
            self.beams = self.beams.index_select(0, index)  # beam numbers within a sentence: valid while it stays
            if not shrink:
                return
        sentences = index[::g] // g if shrink else None  # (N' / G,) rows stay within their sentence
        rows = index if self.beams is None else (sentences[:, None] * g + self.own[:g]).flatten()  # whole sentences
        self.selfs = self._keep(self.selfs, rows, self.length)
        if sentences is not None:
            self.cross = self._keep(self.cross, sentences)
            self.src_mask = self.src_mask.index_select(0, sentences)
            self.sents = self.sents.index_select(0, sentences)

    def _keep(self, tensors: list[Tensor], rows: Tensor, filled: int | None = None) -> list[Tensor]:
        """Rows `rows` of each tensor as its first rows, in place, the first `filled` positions only (dimension 2):
        the rows already in their place, up to the first that is not, stay untouched; the rest are copied out, then
        written (so any order is right). Rows only leave here, and the batch runs longest source first, so the rows
        that end first are mostly the last ones and often nothing moves. Returns the tensors' first rows (views:
        contiguous, no allocation)."""
        m = rows.numel()
        moved = (rows != self.row_ids[:m]).nonzero()
        if moved.numel():
            first, part = int(moved[0]), slice(None, filled)
            for c in tensors:
                c[first:m, :, part] = c[:, :, part].index_select(0, rows[first:])  # a copy of the moved rows first
        return [c[:m] for c in tensors]


def time_steps(model: EncoderDecoder, step: CapturedDecoder | None, beam: int, sentences: int,
               steps: int = 16, src_len: int = 24) -> Callable[[], object]:
    """Work for autotune: `steps` decoding steps of `sentences` x `beam` rows, from a fresh cache each call, with
    the captured `step` (None: the eager lean step, common.py's Seq2SeqSteps)."""
    g = torch.Generator().manual_seed(0)
    c = model.config
    src = torch.randint(4, c.src_vocab_size, (sentences, src_len), generator=g)
    tokens = torch.randint(4, c.tgt_vocab_size, (sentences * beam, steps), generator=g)

    def work() -> None:
        with torch.inference_mode():
            mask = model.src_mask(src)
            run = (Seq2SeqSteps(model, model.encode(src, mask), mask, beam=beam) if step is None
                   else CapturedSteps(model, step, src, mask, steps, beam))
            for t in range(1, steps + 1):
                run(tokens[:, :t])

    return work


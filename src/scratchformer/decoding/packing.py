"""Pre-packed GEMM weights for CPU decoding: each decoding step multiplies the same N rows by the same weights.

    with packed_linears(model, [model.decoder, model.generator], rows=32):   # around the decoding loop
        ...  # every nn.Linear called on exactly 32 rows runs MKL's packed sgemm; other row counts as before

A decoding step at 4-128 rows is a handful of skinny GEMMs, (N x 512) @ (512 x 2048) and the like. MKL can
re-lay a weight matrix once into the blocked order its kernel reads (`cblas_sgemm_pack`, reached through
`torch.ops.mkl._mkl_reorder_linear_weight`, the op torch.compile's CPU backend uses for the same purpose). A
packed weight is only fast for the row count it was packed for (other counts run slower than unpacked), which
a decoding loop keeps fixed until a sentence finishes. Measured on a 2-core Xeon, the 37 GEMMs of a
paper-base decoding step: 1.3x faster at 4 and 8 rows, 1.15x at 32 and 128, the same numbers to the last bit;
packing costs ~30 ms per 100 MB of weights and as much memory again.

bf16 weights (`--dtype bf16`, or auto's) pack through oneDNN (`torch.ops.mkldnn._reorder_linear_weight` and
`_linear_pointwise`, what inductor's weight prepack gives a bf16 package). A oneDNN pack serves any row count
(`serves_any_rows`), so the eager bf16 step packs every call, batched free translation included, and keeps its
packs as sentences finish: on a Xeon with AMX, one sentence's eager bf16 step ran 1.2-1.3x faster packed (54 -> 43
ms a sentence greedy, 2 threads), 320 sentences at batch 32 greedy 1.15x (5.77 -> 5.02 ms a sentence, 1 thread;
beam 4 the same), the same tokens.

So (fp32): packs are made for the row count a decoding call starts with where packing measures faster on this CPU
for these shapes and rows (autotune.py: timed once, then cached; never with SCRATCHFORMER_AUTOTUNE=0),
kept for the next call (one set per model), and set aside as soon as the row count changes (a sentence
finished: the rest of the call runs unpacked). The searches pack only calls whose row count cannot change
before the end: beam search over one sentence (its K beams run until it is done: interactive translation), and
every sentence forced to the same length (greedy `force_len`, beam `min_len` = budget; benchmarks,
fixed-length generation). In batched free translation sentences finish after a few steps, and packing
measured no gain (the shipped en-zh model, 320 test sentences, batch 32: greedy 1.18 vs 1.17 s, beam 4
2.94 vs 2.82 s), so it stays off there.

The packs live outside the modules (nothing changes in state dicts, tying or interop): while the context is open,
each covered nn.Linear has an instance-level `forward` that uses its pack when the input has the packed row count
and falls back to F.linear otherwise; an in-place change of a weight retires its pack. A no-op where torch has no
MKL (ARM, some builds), on GPUs, in training mode and with gradients enabled. The MKL ops are private to torch: if
one is missing or raises (a changed signature), packing is off for the rest of the process and every layer runs
F.linear, with the same outputs. Not for two threads decoding with one model at the same time (they would swap
each other's `forward`): give each thread its own copy of the model.
"""

from __future__ import annotations

import functools
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from scratchformer import autotune
from scratchformer.decoding.fast_step import modules_under
from scratchformer.errors import N_, ScratchformerWarning

_PACKS: weakref.WeakKeyDictionary[nn.Module, Packs] = weakref.WeakKeyDictionary()  # model -> its last packs
_broken: list[str] = []  # why packing failed in this process (then it stays off)


def packing_available(dtype: torch.dtype = torch.float32) -> bool:
    """The packed-GEMM ops for weights of `dtype` are there (fp32: MKL's; bf16: oneDNN's, what inductor's weight
    prepack gives a bf16 package), and packing has not failed in this process."""
    if _broken:
        return False
    if dtype == torch.bfloat16:
        return _onednn_runs()
    return (dtype == torch.float32 and torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")
            and hasattr(torch.ops.mkl, "_mkl_reorder_linear_weight"))


@functools.cache
def _onednn_runs() -> bool:
    """oneDNN's packed bf16 GEMM ops are in this torch and run here, tried once on a 4 x 4 weight: where they do not
    (a CPU without AVX-512, a build without them) bf16 is simply not packed, and fp32's MKL packing stays on."""
    if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
            and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
        return False
    try:
        with torch.inference_mode():
            packed_gemm(torch.ones(4, 4, dtype=torch.bfloat16))(torch.ones(1, 4, dtype=torch.bfloat16))
    except RuntimeError:
        return False
    return True


def serves_any_rows(dtype: torch.dtype | None) -> bool:
    """Whether a pack of weights of `dtype` serves every row count (oneDNN's bf16 packs), not only the one it was
    made for (MKL's fp32 packs): then a decoding call keeps its packs while sentences finish."""
    return dtype == torch.bfloat16


def packed_gemm(weight: Tensor) -> Callable[[Tensor], Tensor]:
    """x -> F.linear(x, weight) through the packed GEMM of a bf16 weight (oneDNN's, packed for any row count, as
    inductor packs a package's weights): what autotune's dtype rule times for the captured step."""
    packed = _pack(weight, None)
    return lambda x: _packed_linear(x, packed, weight, None, None)


def _pack(weight: Tensor, rows: int | None) -> Tensor:
    """`weight` re-laid for the packed GEMM of its dtype at `rows` input rows (MKL's sgemm pack), or for any rows
    (oneDNN's bf16 pack, serves_any_rows)."""
    if weight.dtype == torch.bfloat16:
        return torch.ops.mkldnn._reorder_linear_weight(weight, None)
    return torch.ops.mkl._mkl_reorder_linear_weight(weight, rows)


def _packed_linear(x: Tensor, packed: Tensor, weight: Tensor, bias: Tensor | None, rows: int | None) -> Tensor:
    """F.linear(x, weight, bias) through `packed` (_pack's), the same numbers."""
    if weight.dtype == torch.bfloat16:
        return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")
    return torch.ops.mkl._mkl_linear(x, packed, weight, bias, rows)


class PackingWarning(ScratchformerWarning, RuntimeWarning):
    """Packing failed and is off: a RuntimeWarning (a torch op changed under us), with a translatable template."""


def _give_up(error: Exception) -> None:
    """Packing off for the rest of the process: a private torch op is gone or changed."""
    if not _broken:
        warnings.warn(PackingWarning(N_("MKL packed GEMMs failed ({kind}: {error}); decoding goes on unpacked"),
                                     kind=type(error).__name__, error=str(error)), stacklevel=3)
    _broken.append(f"{type(error).__name__}: {error}")


def should_pack(linears: Sequence[nn.Linear], rows: int) -> bool:
    """Whether packed weights run these layers faster at `rows` input rows on this CPU: measured once per
    shapes and row count (one real weight per shape, packed and unpacked, timed by autotune), then cached."""
    weights = [m.weight for m in linears]
    shapes = autotune.shape_counts(weights)
    firsts = {tuple(w.shape): w.detach() for w in reversed(weights)}
    dtype = weights[0].dtype
    inputs = {i: torch.randn(rows, i).to(dtype) for _, i, _ in shapes}
    packed: list[tuple[Tensor, Tensor, int]] = []  # (packed, weight, count), made on the warm-up call

    def unpacked() -> None:
        for o, i, n in shapes:
            for _ in range(n):
                F.linear(inputs[i], firsts[(o, i)])

    def with_packs() -> None:
        if not packed:
            packed.extend((_pack(firsts[(o, i)], rows), firsts[(o, i)], n) for o, i, n in shapes)
        for p, w, n in packed:
            for _ in range(n):
                _packed_linear(inputs[w.size(1)], p, w, None, rows)

    try:
        with torch.no_grad():
            key = {"shapes": shapes, "rows": rows, **({"dtype": "bf16"} if dtype == torch.bfloat16 else {})}
            return autotune.choose("mkl-packing", key,
                                   {"unpacked": unpacked, "packed": with_packs}, "unpacked") == "packed"
    except Exception as e:  # a private op: any failure means unpacked
        _give_up(e)
        return False


class Packs:
    """The packed weights of some nn.Linear layers for one row count (bf16: for any, serves_any_rows)."""

    def __init__(self, linears: list[nn.Linear], rows: int) -> None:
        self.rows, self.linears = rows, linears
        with torch.no_grad():  # (opaque buffer, weight version when packed) per layer; may raise (see _give_up)
            self.packed = [(_pack(m.weight.detach(), rows), m.weight._version) for m in linears]

    def usable_for(self, linears: list[nn.Linear], rows: int) -> bool:
        any_rows = serves_any_rows(self.linears[0].weight.dtype) if self.linears else False
        return ((rows == self.rows or any_rows) and len(linears) == len(self.linears)
                and all(a is b for a, b in zip(linears, self.linears))
                and all(m.weight._version == v for m, (_, v) in zip(linears, self.packed)))


def linears_under(modules: Sequence[nn.Module]) -> list[nn.Linear]:
    """The plain nn.Linear layers under `modules`, in one fixed order: what packing covers and should_pack times."""
    return [m for m in modules_under(list(modules)) if type(m) is nn.Linear]


@contextmanager
def packed_linears(owner: nn.Module, modules: Sequence[nn.Module], rows: int) -> Iterator[bool]:
    """Run every nn.Linear under `modules` from weights packed for `rows` input rows while the context is open;
    the packs are kept per `owner` (the model) for the next call. Yields whether packing is on."""
    linears = linears_under(modules)
    dtype = linears[0].weight.dtype if linears else None
    if not (rows >= 1 and linears and autotune.enabled() and packing_available(dtype) and not torch.is_grad_enabled()
            and all(m.weight.device.type == "cpu" and m.weight.dtype == dtype and not m.training for m in linears)):
        yield False
        return
    packs = _packs_for(owner, linears, rows)
    if packs is None:
        yield False
        return
    for m, (packed, version) in zip(linears, packs.packed):
        m.forward = _packed_forward(m, packed, version, rows)  # instance attribute: shadows nn.Linear.forward
    try:
        yield True
    finally:
        for m in linears:
            m.__dict__.pop("forward", None)


def _packs_for(owner: nn.Module, linears: list[nn.Linear], rows: int) -> Packs | None:
    """The owner's packs for these layers at `rows` rows (kept, or made if packing pays here); None: unpacked."""
    packs = _PACKS.get(owner)
    if packs is not None and packs.usable_for(linears, rows):
        return packs
    _PACKS.pop(owner, None)  # free the old packs before making new ones
    if not should_pack(linears, rows):
        return None
    try:
        packs = _PACKS[owner] = Packs(linears, rows)
    except Exception as e:  # a private op: any failure means unpacked
        _give_up(e)
        return None
    return packs


def _packed_forward(linear: nn.Linear, packed: Tensor, version: int, rows: int) -> Callable[[Tensor], Tensor]:
    weight, bias, d_in = linear.weight, linear.bias, linear.in_features
    any_rows = serves_any_rows(weight.dtype)

    def forward(x: Tensor) -> Tensor:  # (..., d_in) -> (..., d_out)
        if not _broken and (any_rows or x.numel() == rows * d_in) and x.dtype == weight.dtype \
                and weight._version == version:
            try:
                return _packed_linear(x, packed, weight, bias, rows)
            except Exception as e:  # a private op: any failure means unpacked
                _give_up(e)
        return F.linear(x, weight, bias)

    return forward

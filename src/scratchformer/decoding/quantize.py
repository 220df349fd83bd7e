"""Dynamic int8 quantisation for CPU decoding: every nn.Linear becomes an int8 x int8 -> int32 GEMM.

    model = quantize_int8(model)        # a quantised copy; `scratchformer translate --int8` does this

Weights are quantised once, per output channel (symmetric int8, one scale per row of W, as CTranslate2's
int8); activations are quantised on the fly at each call ("dynamic"). Embeddings, LayerNorms and attention
itself stay float32. The tied output layer gets its own int8 copy, while the embedding lookup keeps the float
table.

Our own small module (Int8Linear), not torch.ao.quantization.quantize_dynamic (deprecated, removal planned).
It runs the kernel quantize_dynamic ran underneath: `torch.ops.quantized.linear_dynamic` on a weight prepacked
once for fbgemm (x86; activations quantised per tensor to 7-bit unsigned inside the op, fbgemm's reduce_range),
with the same int8 weights: the same outputs (tested), so the speed and BLEU cost measured before hold
(benchmarks/RESULTS.md). Alternatives measured on an AMD EPYC (AVX2, torch 2.13): torch._int_mm on the CPU runs
10-500x slower than float32 (a reference kernel), torchao 0.18's Int8DynamicActivationInt8WeightConfig in eager
mode 13-80x slower (it calls _int_mm). torch 2.13 also deprecates the quantized tensors the prepack takes: where
the op is missing, fails on first use (a changed signature), or the weights are not on the CPU, the layer
computes in float32 from its dequantised weight (W = int8 * scale) on activations rounded as the kernel rounds
them: the same outputs to ~1e-6, slower; the process stays on that path (`int8_backend()` says which runs).
Memory: the int8 weight is kept beside fbgemm's pack (one more byte per weight) so the fallback always has it.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import Tensor, nn
from torch.nn import functional as F

_state = {"backend": None}  # "fbgemm" or "float": decided on the first call in the process


def int8_backend() -> str:
    """"fbgemm" (quantized::linear_dynamic) or "float" (dequantised weights): the path int8 layers take."""
    if _state["backend"] is None:
        ops = getattr(torch.ops, "quantized", None)
        has_ops = all(hasattr(ops, name) for name in ("linear_prepack", "linear_dynamic"))
        engines = torch.backends.quantized.supported_engines
        _state["backend"] = "fbgemm" if has_ops and engines and engines != ["none"] else "float"
    return _state["backend"]


def _fall_back(error: Exception) -> None:
    """The dequantised-float path for the rest of the process: the int8 op is gone or changed."""
    warnings.warn(f"int8 GEMM unavailable ({type(error).__name__}: {error}); int8 layers compute in float32 "
                  "from their dequantised weights (same weights, slower)", RuntimeWarning, stacklevel=3)
    _state["backend"] = "float"


class Int8Linear(nn.Module):
    """y = x W^T + b, W held as int8 (one float scale per output row), x quantised dynamically at each call."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        w = linear.weight.detach().float()  # (out, in)
        # (out,): symmetric per row, as torch's per-channel observer (so int8 weights are those measured before)
        scale = (w.abs().amax(dim=1) / 127.5).clamp_min(torch.finfo(torch.float32).eps)
        inverse = 1.0 / scale[:, None]  # w * (1 / scale), rounded half to even: as fbgemm rounds
        self.register_buffer("weight_int8", torch.round(w * inverse).clamp_(-128, 127).to(torch.int8))
        self.register_buffer("weight_scale", scale)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float().clone())
        self._packed: object | None = None  # fbgemm's prepacked weight, made on the first fast call
        self._dequantised: Tensor | None = None  # the float path's weight, made on its first call

    def forward(self, x: Tensor) -> Tensor:  # (..., in) -> (..., out)
        if int8_backend() == "fbgemm" and self.weight_int8.device.type == "cpu":
            try:
                return torch.ops.quantized.linear_dynamic(x.float(), self.packed(), reduce_range=True).to(x.dtype)
            except Exception as e:  # an op of torch's quantized backend: if it fails, the float path serves
                _fall_back(e)
        y = F.linear(_fake_quantised(x.float()), self.dequantised(), self.bias)
        return y.to(x.dtype)

    def packed(self) -> object:
        if self._packed is None:
            zeros = torch.zeros(self.out_features, dtype=torch.long)
            w = self.weight_int8.float() * self.weight_scale[:, None]  # re-quantises to exactly weight_int8
            with warnings.catch_warnings():  # torch 2.13 deprecates quantized tensors: when they go, the float path
                warnings.filterwarnings("ignore", message=".*quantiz.*deprecated.*")
                qweight = torch.quantize_per_channel(w, self.weight_scale.double(), zeros, 0, torch.qint8)
                self._packed = _prepack(qweight, self.bias)
        return self._packed

    def dequantised(self) -> Tensor:
        """The float32 weight the int8 one stands for: int8 * its row's scale, (out, in)."""
        if self._dequantised is None or self._dequantised.device != self.weight_int8.device:
            self._dequantised = self.weight_int8.float() * self.weight_scale[:, None]
        return self._dequantised

    def _apply(self, fn, recurse=True):  # .to(), .cpu(): the caches follow the buffers when next used
        self._packed, self._dequantised = None, None
        return super()._apply(fn, recurse)

    def __deepcopy__(self, memo):  # the prepacked object does not copy: drop it, it is remade on first use
        fresh = copy.copy(self)
        fresh.__dict__ = {k: copy.deepcopy(v, memo) for k, v in self.__dict__.items() if k not in ("_packed",)}
        fresh._packed = None
        return fresh

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def _prepack(qweight: Tensor, bias: Tensor | None) -> object:
    """fbgemm's packed weight (x86; the engine quantize_dynamic was run with), else the default engine's."""
    engine = torch.backends.quantized.engine
    if "fbgemm" in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = "fbgemm"
    try:
        return torch.ops.quantized.linear_prepack(qweight, bias)
    finally:
        torch.backends.quantized.engine = engine


def _fake_quantised(x: Tensor) -> Tensor:
    """x rounded as linear_dynamic rounds it: per tensor to 7-bit unsigned (fbgemm's reduce_range), with a zero
    point, and back to float; so the float path's outputs stay those of the int8 kernel (up to sum order)."""
    lo, hi = torch.aminmax(x)
    lo, hi = lo.clamp(max=0.0), hi.clamp(min=0.0)  # the range holds 0 exactly
    scale = ((hi - lo) / 127).clamp_min(torch.finfo(torch.float32).eps)
    zero = torch.round(-lo / scale).clamp(0, 127)
    return (torch.round(x / scale) + zero).clamp_(0, 127).sub_(zero).mul_(scale)


def quantize_int8(model: nn.Module, inplace: bool = False) -> nn.Module:
    """A copy of `model` (eval mode, on the CPU) whose nn.Linear layers run in dynamic int8 (Int8Linear).

    Returns a model with the same call signatures, for inference only (no gradients through int8 layers).
    """
    if not inplace:
        model = copy.deepcopy(model)
    model = model.cpu().eval()
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                setattr(parent, name, Int8Linear(child))
    return model

"""Dynamic int8 quantisation for CPU decoding: every nn.Linear becomes an int8 x int8 -> int32 GEMM.

    model = quantize_int8(model)        # a quantised copy; `scratchformer translate --int8` does this

Weights are quantised once, per output channel (one scale per row of W, as CTranslate2's int8); activations
are quantised on the fly, per tensor, at each call ("dynamic"). Embeddings, LayerNorms and attention itself
stay float32. The tied output layer gets its own int8 copy, while the embedding lookup keeps the float table.

API: `torch.ao.quantization.quantize_dynamic` (fbgemm kernels on x86). torch marks torch.ao.quantization as
deprecated in favour of torchao's `quantize_`, which does not yet give a fast dynamic int8 Linear on CPUs;
we keep the torch API and say so clearly if a future torch removes it.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from scratchformer.errors import ConfigError


def quantize_int8(model: nn.Module, inplace: bool = False) -> nn.Module:
    """A copy of `model` (eval mode, on the CPU) whose nn.Linear layers run in dynamic int8.

    Returns a model with the same call signatures, for inference only (no gradients through int8 layers).
    """
    try:
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    except ImportError as e:  # pragma: no cover - depends on the installed torch
        raise ConfigError(f"--int8 needs torch.ao.quantization, which this torch ({torch.__version__}) lacks: {e}; "
                          "decode in float32 instead") from None
    engines = torch.backends.quantized.supported_engines
    if "fbgemm" in engines:
        torch.backends.quantized.engine = "fbgemm"  # x86; qnnpack (ARM) is picked by torch by default elsewhere
    if not inplace:
        model = copy.deepcopy(model)
    model = model.cpu().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantiz.*deprecated.*")
        warnings.filterwarnings("ignore", message=".*deprecated.*quantiz.*")
        return quantize_dynamic(model, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True)


def is_quantized(model: nn.Module) -> bool:
    """True when some layer of `model` runs in dynamic int8."""
    return any(type(m).__module__.startswith("torch.ao.nn.quantized") for m in model.modules())

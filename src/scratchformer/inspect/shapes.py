"""Shape trace: run one forward pass with hooks and print every module's input and output shapes,
with each dimension named (B, L_src, L_tgt, D, h, d_k, d_ff, V), in the order data flows through Figure 1.

The seeds' advice, "print every tensor's shape", turned into a tool.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from scratchformer.config import ModelConfig
from scratchformer.model.transformer import TransformerBase


def dimension_names(config: ModelConfig, batch: int, src_len: int, tgt_len: int) -> dict[int, str]:
    """size -> name; earlier entries win when two dimensions have the same size."""
    c = config
    hk, hv = c.n_heads * c.head_dim_k, c.n_heads * c.head_dim_v
    names: list[tuple[int, str]] = [(batch, "B")]
    if c.arch == "encoder-decoder":
        names += [(src_len, "L_src"), (tgt_len, "L_tgt")]
    else:
        names += [(src_len, "L")]
    names += [(c.d_model, "D"), (c.n_heads, "h"), (c.head_dim_k, "d_k"), (c.head_dim_v, "d_v"), (c.d_ff, "d_ff"),
              (hk, "h*d_k"), (hv, "h*d_v"), (2 * hk + hv, "h*(2d_k+d_v)"), (hk + hv, "h*(d_k+d_v)")]
    if c.arch == "encoder-decoder" and c.src_vocab_size != c.tgt_vocab_size:
        names += [(c.src_vocab_size, "V_src"), (c.tgt_vocab_size, "V_tgt")]
    else:
        names += [(c.tgt_vocab_size, "V")]
    out: dict[int, str] = {}
    for size, name in names:
        out.setdefault(size, name)
    return out


def describe(x: object, names: dict[int, str]) -> str:
    if isinstance(x, Tensor):
        dims = ", ".join(f"{names[s]}={s}" if s in names else str(s) for s in x.shape)
        kind = "" if x.is_floating_point() else f" {str(x.dtype).replace('torch.', '')}"
        return f"({dims}){kind}"
    if isinstance(x, (tuple, list)):
        parts = [describe(y, names) for y in x if isinstance(y, (Tensor, tuple, list))]
        return ", ".join(p for p in parts if p)
    return ""


def _hidden(name: str) -> bool:
    """Modules inside layer 1..N-1 of a stack: identical to layer 0's, so the trace shows them collapsed."""
    parts = name.split(".")
    for i, p in enumerate(parts[:-1]):
        if p == "layers" and i + 2 < len(parts) + 1 and parts[i + 1].isdigit() and parts[i + 1] != "0":
            return i + 2 < len(parts)
    return False


def trace_shapes(model: TransformerBase, inputs: tuple, kwargs: dict | None = None,
                 names: dict[int, str] | None = None, all_layers: bool = False) -> list[str]:
    """Lines `name [Type]  in: ... -> out`, one per module call, indented by call depth, in call order.

    Unless `all_layers`, layers 1..N-1 of each stack show one line each (their insides repeat layer 0).
    """
    names = names or {}
    lines: list[str] = []
    stack: list[int] = []
    handles = []

    def pre_hook(name):
        def hook(module, args, kw):
            ins = describe(list(args) + [v for v in kw.values() if isinstance(v, Tensor)], names)
            stack.append(len(lines))
            lines.append(f"{'  ' * (len(stack) - 1)}{name} [{type(module).__name__}]" + (f"  in: {ins}" if ins else ""))
        return hook

    def post_hook(module, args, kw, out):
        i = stack.pop()
        lines[i] += f"  -> {describe(out, names)}"

    for name, module in model.named_modules():
        if not name or isinstance(module, (nn.Dropout, nn.ModuleList)) or (not all_layers and _hidden(name)):
            continue
        handles.append(module.register_forward_pre_hook(pre_hook(name), with_kwargs=True))
        handles.append(module.register_forward_hook(post_hook, with_kwargs=True))
    try:
        with torch.no_grad():
            out = model(*inputs, **(kwargs or {}))
    finally:
        for h in handles:
            h.remove()
    lines.append(f"model output  -> {describe(out, names)}")
    return lines


def shape_report(model: TransformerBase, batch: int = 2, src_len: int = 10, tgt_len: int = 9,
                 all_layers: bool = False) -> str:
    """Random ids of the given sizes through `model`; the trace with a legend on top."""
    c = model.config
    g = torch.Generator().manual_seed(0)
    names = dimension_names(c, batch, src_len, tgt_len)
    if c.arch == "encoder-decoder":
        inputs = (torch.randint(4, c.src_vocab_size, (batch, src_len), generator=g),
                  torch.randint(4, c.tgt_vocab_size, (batch, tgt_len), generator=g))
    else:
        inputs = (torch.randint(4, c.tgt_vocab_size, (batch, src_len), generator=g),)
    model.eval()
    legend = "dimensions: " + ", ".join(f"{v}={k}" for k, v in names.items())
    return "\n".join([legend, ""] + trace_shapes(model, inputs, names=names, all_layers=all_layers))

"""The three graphs of the ONNX export, as small nn.Modules over plain tensors (the exporter cannot see KVCache).

    EncoderGraph       input_ids (B, L_src), attention_mask (B, L_src)  -> last_hidden_state (B, L_src, D)
    DecoderGraph       input_ids (B, L), encoder_attention_mask (B, L_src), encoder_hidden_states (B, L_src, D)
                       -> logits (B, L, V), present.{i}.decoder.key/value (B, h, L, d),
                          present.{i}.encoder.key/value (B, h, L_src, d)              the first step, no past
    DecoderWithPast    input_ids (B, L), encoder_attention_mask (B, L_src),
                       past_key_values.{i}.decoder.key/value (B, h, L_past, d), .encoder.key/value (B, h, L_src, d)
                       -> logits (B, L, V), present.{i}.decoder.key/value (B, h, L_past + L, d)

The file names, the input and output names and the split into decoder_model / decoder_with_past_model are
Optimum's for seq2seq models (optimum.onnxruntime.ORTModelForSeq2SeqLM reads the encoder's `last_hidden_state`,
feeds every graph input it names and splits the outputs holding ".key"/".value" by "encoder" in the name). The
graphs run our own modules (model.src_embed, model.encoder, model.tgt_embed, model.decoder, model.generator):
the decoder reads and writes its keys and values through `TensorCache`, a plain-tensor stand-in for DecoderCache.
attention_mask is Hugging Face's convention: 1 = real token, 0 = padding.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.export import Dim

from scratchformer.data.tokenizers import BOS_ID, EOS_ID
from scratchformer.decoding.common import eval_mode
from scratchformer.model.masks import causal_mask
from scratchformer.model.transformer import EncoderDecoder, _decoder_self_mask

KINDS = ("decoder.key", "decoder.value", "encoder.key", "encoder.value")  # per layer, in this order
ENCODER_OUTPUT = "last_hidden_state"  # Optimum's name (ORTEncoder), fed back to the decoders as encoder_hidden_states


class _Keys:
    """One attention's keys/values as plain tensors, with the methods MultiHeadAttention calls on a KVCache."""

    def __init__(self, k: Tensor | None = None, v: Tensor | None = None) -> None:
        self.k, self.v = k, v

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:  # self-attention: (B, h, L_past + L, d)
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        return self.k, self.v

    def set(self, k: Tensor, v: Tensor) -> None:  # cross-attention, first step: (B, h, L_src, d)
        self.k, self.v = k, v

    def get(self) -> tuple[Tensor, Tensor]:
        return self.k, self.v


class TensorCache:
    """What Decoder.forward reads from a DecoderCache (`self_attn[i]`, `cross_attn[i]`), built from plain tensors.

    past: 4 tensors per layer in KINDS order, or None for the first step."""

    def __init__(self, n_layers: int, past: tuple[Tensor, ...] | None = None) -> None:
        p = past or (None,) * (4 * n_layers)
        self.self_attn = [_Keys(p[4 * i], p[4 * i + 1]) for i in range(n_layers)]
        self.cross_attn = [_Keys(p[4 * i + 2], p[4 * i + 3]) for i in range(n_layers)]

    def present(self, cross: bool) -> tuple[Tensor, ...]:
        """The updated keys/values per layer: decoder key, value (and encoder key, value when `cross`)."""
        out: list[Tensor] = []
        for s, c in zip(self.self_attn, self.cross_attn):
            out += [s.k, s.v, c.k, c.v] if cross else [s.k, s.v]
        return tuple(out)


def _mask(attention_mask: Tensor) -> Tensor:
    return (attention_mask != 0)[:, None, None, :]  # (B, L_src) 1/0 -> (B, 1, 1, L_src) bool, True = may attend


class EncoderGraph(nn.Module):
    def __init__(self, model: EncoderDecoder) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        m = self.model
        return m.encoder(m.src_embed(input_ids), _mask(attention_mask))  # (B, L_src, D)


class DecoderGraph(nn.Module):
    """The first decoding step (or a whole target prefix, teacher-forced): no past; returns every key/value."""

    def __init__(self, model: EncoderDecoder) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Tensor, encoder_attention_mask: Tensor,
                encoder_hidden_states: Tensor) -> tuple[Tensor, ...]:
        m, c = self.model, self.model.config
        self_mask = _decoder_self_mask(input_ids, c.pad_id, 0, c.decoder_start_id == c.pad_id)  # (B, 1, L, L)
        cache = TensorCache(c.n_decoder_layers)
        x = m.tgt_embed(input_ids)  # (B, L, D), positions 0 .. L-1
        hidden = m.decoder(x, encoder_hidden_states, self_mask, _mask(encoder_attention_mask), cache)
        return (m.generator.logits(hidden), *cache.present(cross=True))  # (B, L, V), 4 per layer


class DecoderWithPast(nn.Module):
    """Later steps: the new token(s) attend to the past self-attention keys/values and to the encoder's."""

    def __init__(self, model: EncoderDecoder) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Tensor, encoder_attention_mask: Tensor, *past: Tensor) -> tuple[Tensor, ...]:
        m, c = self.model, self.model.config
        n_past, n_new = past[0].size(2), input_ids.size(1)
        self_mask = causal_mask(n_new, n_past + n_new, input_ids.device)  # (1, 1, L, L_past + L)
        positions = torch.arange(n_past, n_past + n_new, device=input_ids.device)[None, :]  # (1, L)
        cache = TensorCache(c.n_decoder_layers, past)
        x = m.tgt_embed(input_ids, positions)  # (B, L, D)
        hidden = m.decoder(x, None, self_mask, _mask(encoder_attention_mask), cache)
        return (m.generator.logits(hidden), *cache.present(cross=False))  # (B, L, V), 2 per layer


def input_names(n_layers: int, with_past: bool) -> list[str]:
    if not with_past:
        return ["input_ids", "encoder_attention_mask", "encoder_hidden_states"]
    return ["input_ids", "encoder_attention_mask", *past_names("past_key_values", n_layers, KINDS)]


def output_names(n_layers: int, with_past: bool) -> list[str]:
    return ["logits", *past_names("present", n_layers, KINDS[:2] if with_past else KINDS)]


def past_names(prefix: str, n_layers: int, kinds: tuple[str, ...]) -> list[str]:
    return [f"{prefix}.{i}.{kind}" for i in range(n_layers) for kind in kinds]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporter's progress lines (stdout), its notes on axis names (warnings) and on torchvision (logging):
    none of them is for the user of `translate`, whose stdout holds the translations."""
    log = logging.getLogger("torch.onnx")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        log.setLevel(level)


def export_graphs(model: EncoderDecoder, out: Path) -> list[str]:
    """Write encoder_model.onnx, decoder_model.onnx and decoder_with_past_model.onnx into `out` (the dynamo
    exporter, dynamic batch and length axes); returns the file names."""
    c, device = model.config, next(model.parameters()).device
    n, h, d_k, d_v = c.n_decoder_layers, c.n_heads, c.head_dim_k, c.head_dim_v
    b, s, t, p = (Dim(name, min=1) for name in ("batch", "src_len", "tgt_len", "past_len"))
    # example sizes >= 2 everywhere: the exporter would fix an axis of size 1 (or 0) to that size
    batch, src_len, tgt_len, past_len = 2, 5, 3, 4
    src = torch.full((batch, src_len), EOS_ID, dtype=torch.long, device=device)  # (B, L_src)
    mask = torch.ones(batch, src_len, dtype=torch.long, device=device)  # (B, L_src)
    tgt = torch.full((batch, tgt_len), BOS_ID, dtype=torch.long, device=device)  # (B, L)
    memory = torch.zeros(batch, src_len, c.d_model, device=device)  # (B, L_src, D)
    widths = {"key": d_k, "value": d_v}
    past = tuple(torch.zeros(batch, h, past_len if kind.startswith("decoder") else src_len, widths[kind.split(".")[1]],
                             device=device) for _ in range(n) for kind in KINDS)
    past_axes = tuple({0: b, 2: p if kind.startswith("decoder") else s} for _ in range(n) for kind in KINDS)
    jobs = [("encoder_model.onnx", EncoderGraph(model), (src, mask), ["input_ids", "attention_mask"],
             [ENCODER_OUTPUT], ({0: b, 1: s}, {0: b, 1: s})),
            ("decoder_model.onnx", DecoderGraph(model), (tgt, mask, memory), input_names(n, False),
             output_names(n, False), ({0: b, 1: t}, {0: b, 1: s}, {0: b, 1: s})),
            ("decoder_with_past_model.onnx", DecoderWithPast(model), (tgt, mask, *past), input_names(n, True),
             output_names(n, True), ({0: b, 1: t}, {0: b, 1: s}, past_axes))]
    with eval_mode(model), _quiet():
        for name, graph, args, inputs, outputs, axes in jobs:
            torch.onnx.export(graph.eval(), args, str(out / name), dynamo=True, external_data=False,
                              input_names=inputs, output_names=outputs, dynamic_shapes=axes, verbose=False)
    return [job[0] for job in jobs]

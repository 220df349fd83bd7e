"""The assembled model in Keras (twin of model/transformer.py; Figure 1, whole) and the output layer.

    Generator       (B, L, D) -> (B, L, V) logits: seed 001's final Dense(vocab); tied: the target embedding's (V, D)
                    table transposed, plus a bias
    EncoderDecoder  keras.Model: model((src, tgt)) -> logits (B, L_tgt, V); encode() / decode() as in the seeds

Masks are derived from pad_id inside, as ours: padding (B, 1, 1, L_src) for the encoder and the cross-attention,
causal & padding (B, 1, L_tgt, L_tgt) for the decoder's self-attention (seed 001's `combined_mask`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import keras
from keras import ops

from scratchformer.config import ModelConfig
from scratchformer.errors import N_, InputError
from scratchformer.keras.attention import dense, dense_variables
from scratchformer.keras.decoder import Decoder
from scratchformer.keras.embedding import InputLayer
from scratchformer.keras.encoder import Encoder
from scratchformer.keras.masks import causal_mask, combine, padding_mask
from scratchformer.keras.parts import as_config

PACKAGE = "scratchformer"


@keras.saving.register_keras_serializable(package=PACKAGE)
class Generator(keras.layers.Layer):
    """The output layer: a linear map to the vocabulary (logits; the softmax is the loss's or the search's).
    tied=True: no matrix of its own; call(x, table) multiplies by the (V, D) embedding table given."""

    def __init__(self, d_model: int, vocab_size: int, bias: bool = True, tied: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.args = dict(d_model=d_model, vocab_size=vocab_size, bias=bias, tied=tied)
        self.proj = None if tied else dense(vocab_size, d_model, bias, "proj")
        self.bias = self.add_weight(shape=(vocab_size,), initializer="zeros", name="bias") if tied and bias else None
        self.built = True

    def call(self, x: Any, table: Any = None) -> Any:
        if self.proj is not None:
            return self.proj(x)  # (B, L, D) -> (B, L, V)
        logits = ops.matmul(x, ops.transpose(table))  # (B, L, D) x (D, V) -> (B, L, V)
        return logits + self.bias if self.bias is not None else logits

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        if self.proj is not None:
            yield from dense_variables(self.proj, prefix + "proj.")
        elif self.bias is not None:
            yield prefix + "proj.bias", self.bias, False

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self.args}


def check_length(ids: Any, max_len: int, name: str, offset: int = 0) -> None:
    """One-line InputError for ids longer than the model's positions (when the length is known)."""
    length = ids.shape[1]
    if isinstance(length, int) and offset + length > max_len:
        raise InputError(N_("{name} reaches position {value}, longer than max_positions={max_len}: truncate the input "
                            "or build the model with a larger max_positions"), name=name,
                         value=offset + length, max_len=max_len)


def decoder_self_mask(tgt: Any, pad_id: int | None, start_is_pad: bool = False) -> Any:
    """(B, 1, L, L): causal & padding. start_is_pad: position 0 is the start symbol even if it equals pad_id."""
    length = ops.shape(tgt)[1]
    causal = causal_mask(length)  # (1, 1, L, L)
    if pad_id is None:
        return causal
    pad = padding_mask(tgt, pad_id)  # (B, 1, 1, L)
    if start_is_pad:
        pad = ops.logical_or(pad, ops.reshape(ops.arange(length) == 0, (1, 1, 1, -1)))
    return combine(causal, pad)


def _input_layer(c: ModelConfig, vocab_size: int, name: str, token: Any = None) -> InputLayer:
    return InputLayer(vocab_size=vocab_size, d_model=c.d_model, max_len=c.max_positions, positions=c.positions,
                      dropout=c.dropout, pad_id=c.pad_id, scale=c.scale_embeddings, token=token, name=name)


@keras.saving.register_keras_serializable(package=PACKAGE)
class EncoderDecoder(keras.Model):
    """The paper's Transformer: model((src (B, L_src), tgt (B, L_tgt))) -> logits (B, L_tgt, V_tgt)."""

    def __init__(self, model_config: ModelConfig | dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        c = self.model_config = as_config(model_config)
        self.tgt_embed = _input_layer(c, c.tgt_vocab_size, "tgt_embed")
        share = c.tie_embeddings and c.src_vocab_size == c.tgt_vocab_size  # section 3.4: one matrix for both
        self.src_embed = _input_layer(c, c.src_vocab_size, "src_embed", self.tgt_embed.token if share else None)
        self.encoder = Encoder(c, name="encoder")
        self.decoder = Decoder(c, cross=True, name="decoder")
        self.generator = Generator(c.d_model, c.tgt_vocab_size, c.generator_bias, c.tie_embeddings, name="generator")
        self.built = True

    def src_mask(self, src: Any) -> Any:
        return padding_mask(src, self.model_config.pad_id)  # (B, 1, 1, L_src)

    def encode(self, src: Any, training: bool = False) -> Any:
        """src (B, L_src) -> memory (B, L_src, D)."""
        check_length(src, self.model_config.max_positions, "src")
        return self.encoder(self.src_embed(src, training=training), self.src_mask(src), training=training)

    def decode(self, memory: Any, src_mask: Any, tgt: Any, training: bool = False) -> Any:
        """tgt (B, L_tgt) attends to itself (causally) and to memory (B, L_src, D) -> hidden (B, L_tgt, D)."""
        c = self.model_config
        check_length(tgt, c.max_positions, "tgt")
        start_is_pad = c.decoder_start_id is not None and c.decoder_start_id == c.pad_id
        tgt_mask = decoder_self_mask(tgt, c.pad_id, start_is_pad)  # (B, 1, L_tgt, L_tgt)
        x = self.tgt_embed(tgt, training=training)  # (B, L_tgt, D)
        return self.decoder(x, memory, tgt_mask, src_mask, training=training)

    def logits(self, hidden: Any) -> Any:
        table = self.tgt_embed.token.weight if self.model_config.tie_embeddings else None
        return self.generator(hidden, table)  # (B, L, V)

    def call(self, inputs: Any, training: bool = False) -> Any:
        src, tgt = inputs
        src_mask = self.src_mask(src)  # (B, 1, 1, L_src)
        memory = self.encode(src, training=training)  # (B, L_src, D)
        return self.logits(self.decode(memory, src_mask, tgt, training=training))  # (B, L_tgt, V)

    def torch_variables(self, prefix: str = "") -> Iterator[tuple[str, Any, bool]]:
        """(name in our torch state dict, Keras variable, stored transposed?) for every weight, each once."""
        yield from self.src_embed.torch_variables(prefix + "src_embed.")
        if self.src_embed.token is not self.tgt_embed.token:
            yield from self.tgt_embed.torch_variables(prefix + "tgt_embed.")
        else:
            yield from self.tgt_embed.position.torch_variables(prefix + "tgt_embed.position.")
        yield from self.encoder.torch_variables(prefix + "encoder.")
        yield from self.decoder.torch_variables(prefix + "decoder.")
        yield from self.generator.torch_variables(prefix + "generator.")

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "model_config": self.model_config.to_dict()}

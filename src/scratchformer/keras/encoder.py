"""The encoder in Keras (twin of model/encoder.py; Figure 1, left): N layers of self-attention and FFN.

    EncoderLayer   x -> SublayerConnection(MultiHeadAttention(x, x, x)) -> SublayerConnection(FFN)
    Encoder        N layers (+ a final norm for pre-norm)            (B, L_src, D) -> (B, L_src, D)

`training` reaches every Dropout explicitly: Keras has no model.train()/model.eval() switch. The mask argument is
`attn_mask` (torch: `mask`): Keras reserves `mask` for its own (B, L) timestep masks and would warn.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import keras

from scratchformer.config import ModelConfig
from scratchformer.keras.parts import as_config, attention, ffn, final_norm, sublayers

PACKAGE = "scratchformer"


@keras.saving.register_keras_serializable(package=PACKAGE)
class EncoderLayer(keras.layers.Layer):
    def __init__(self, model_config: ModelConfig | dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        c = self.model_config = as_config(model_config)
        self.self_attn = attention(c)
        self.feed_forward = ffn(c)
        self.sublayer = sublayers(c, 2)  # 2: around the attention, around the FFN
        self.built = True

    def call(self, x: Any, attn_mask: Any = None, training: bool = False) -> Any:
        # x: (B, L, D); attn_mask: (B, 1, 1, L) padding, True = may attend
        def attend(y: Any) -> Any:
            return self.self_attn(y, attn_mask=attn_mask, training=training)

        x = self.sublayer[0](x, sublayer=attend, training=training)  # (B, L, D)
        return self.sublayer[1](x, sublayer=lambda y: self.feed_forward(y, training=training), training=training)

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        yield from self.self_attn.torch_variables(prefix + "self_attn.")
        yield from self.feed_forward.torch_variables(prefix + "feed_forward.")
        for i, s in enumerate(self.sublayer):
            yield from s.torch_variables(f"{prefix}sublayer.{i}.")

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "model_config": self.model_config.to_dict()}


@keras.saving.register_keras_serializable(package=PACKAGE)
class Encoder(keras.layers.Layer):
    def __init__(self, model_config: ModelConfig | dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        c = self.model_config = as_config(model_config)
        self.layers = [EncoderLayer(c, name=f"layers_{i}") for i in range(c.n_encoder_layers)]
        self.norm = final_norm(c)
        self.built = True

    def call(self, x: Any, attn_mask: Any = None, training: bool = False) -> Any:
        for layer in self.layers:
            x = layer(x, attn_mask, training=training)  # (B, L_src, D)
        return self.norm(x) if self.norm is not None else x

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        for i, layer in enumerate(self.layers):
            yield from layer.torch_variables(f"{prefix}layers.{i}.")
        if self.norm is not None:
            yield from self.norm.torch_variables(prefix + "norm.")

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "model_config": self.model_config.to_dict()}

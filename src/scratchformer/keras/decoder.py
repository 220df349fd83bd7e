"""The decoder in Keras (twin of model/decoder.py; Figure 1, right): masked self-attention, cross-attention, FFN.

    DecoderLayer   x -> Sub(MaskedSelfAttn(x)) -> Sub(CrossAttn(x, memory)) -> Sub(FFN)
    Decoder        N layers (+ a final norm for pre-norm)          (B, L_tgt, D) -> (B, L_tgt, D)

No KV cache: each decoding step re-runs the decoder on the whole prefix, as seed 001's greedy loop does
(decode.py); the outputs are the same, only slower for long outputs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import keras

from scratchformer.config import ModelConfig
from scratchformer.keras.parts import as_config, attention, ffn, final_norm, sublayers

PACKAGE = "scratchformer"


@keras.saving.register_keras_serializable(package=PACKAGE)
class DecoderLayer(keras.layers.Layer):
    def __init__(self, model_config: ModelConfig | dict[str, Any], cross: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        c = self.model_config = as_config(model_config)
        self.self_attn = attention(c)
        self.cross_attn = attention(c, cross=True, name="cross_attn") if cross else None
        self.feed_forward = ffn(c)
        self.sublayer = sublayers(c, 3 if cross else 2)
        self.built = True

    def call(self, x: Any, memory: Any = None, self_mask: Any = None, memory_mask: Any = None,
             training: bool = False) -> Any:
        # x: (B, L_tgt, D); memory: (B, L_src, D); self_mask: (B|1, 1, L_tgt, L_tgt); memory_mask: (B, 1, 1, L_src)
        def attend(y: Any) -> Any:
            return self.self_attn(y, attn_mask=self_mask, training=training)

        x = self.sublayer[0](x, sublayer=attend, training=training)  # (B, L_tgt, D)
        if self.cross_attn is not None:
            x = self.sublayer[1](x, sublayer=lambda y: self.cross_attn(y, memory, memory_mask, training=training),
                                 training=training)
        return self.sublayer[-1](x, sublayer=lambda y: self.feed_forward(y, training=training), training=training)

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        yield from self.self_attn.torch_variables(prefix + "self_attn.")
        if self.cross_attn is not None:
            yield from self.cross_attn.torch_variables(prefix + "cross_attn.")
        yield from self.feed_forward.torch_variables(prefix + "feed_forward.")
        for i, s in enumerate(self.sublayer):
            yield from s.torch_variables(f"{prefix}sublayer.{i}.")

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "model_config": self.model_config.to_dict(),
                "cross": self.cross_attn is not None}


@keras.saving.register_keras_serializable(package=PACKAGE)
class Decoder(keras.layers.Layer):
    def __init__(self, model_config: ModelConfig | dict[str, Any], cross: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        c = self.model_config = as_config(model_config)
        self.cross = cross
        self.layers = [DecoderLayer(c, cross, name=f"layers_{i}") for i in range(c.n_decoder_layers)]
        self.norm = final_norm(c)
        self.built = True

    def call(self, x: Any, memory: Any = None, self_mask: Any = None, memory_mask: Any = None,
             training: bool = False) -> Any:
        for layer in self.layers:
            x = layer(x, memory, self_mask, memory_mask, training=training)  # (B, L_tgt, D)
        return self.norm(x) if self.norm is not None else x

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        for i, layer in enumerate(self.layers):
            yield from layer.torch_variables(f"{prefix}layers.{i}.")
        if self.norm is not None:
            yield from self.norm.torch_variables(prefix + "norm.")

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "model_config": self.model_config.to_dict(), "cross": self.cross}

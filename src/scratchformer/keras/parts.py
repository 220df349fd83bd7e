"""A ModelConfig -> the Keras boxes it names (as model/transformer.py's _attention, _ffn, _sublayers do for torch).

The composite layers (EncoderLayer, Decoder, ...) take the run's config as a dict, `model_config`, so that a
saved `.keras` file rebuilds them from one JSON object; the leaf boxes take plain sizes, as their torch twins do.
"""

from __future__ import annotations

from typing import Any

from scratchformer.config import ModelConfig
from scratchformer.keras.attention import MultiHeadAttention
from scratchformer.keras.feedforward import PositionwiseFeedForward
from scratchformer.keras.norm import SublayerConnection, make_norm


def as_config(model_config: ModelConfig | dict[str, Any]) -> ModelConfig:
    return model_config if isinstance(model_config, ModelConfig) else ModelConfig.from_dict(dict(model_config))


def attention(c: ModelConfig, cross: bool = False, name: str = "self_attn") -> MultiHeadAttention:
    return MultiHeadAttention(d_model=c.d_model, n_heads=c.n_heads, d_k=c.head_dim_k, d_v=c.head_dim_v,
                              n_kv_heads=c.kv_heads, dropout=c.attention_dropout, bias=c.bias, cross=cross, name=name)


def ffn(c: ModelConfig) -> PositionwiseFeedForward:
    return PositionwiseFeedForward(d_model=c.d_model, d_ff=c.d_ff, activation=c.activation,
                                   dropout=c.activation_dropout, bias=c.bias, gated=c.ffn_kind == "gated",
                                   name="feed_forward")


def sublayers(c: ModelConfig, n: int) -> list[SublayerConnection]:
    return [SublayerConnection(d_model=c.d_model, norm_kind=c.norm_kind, eps=c.layer_norm_eps, dropout=c.dropout,
                               placement=c.norm_placement, name=f"sublayer_{i}") for i in range(n)]


def final_norm(c: ModelConfig) -> Any:
    return make_norm(c.norm_kind, c.d_model, c.layer_norm_eps) if c.use_final_norm else None

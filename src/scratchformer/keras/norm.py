"""Add & Norm in Keras (twin of model/norm.py): the two norms by hand and the residual sublayer.

    LayerNorm  y = (x - mean) / sqrt(var + eps) * weight + bias, over the last dim (D)   (the paper)
    RMSNorm    y = x / sqrt(mean(x^2) + eps) * weight, over the last dim (D)             (Llama)
    Seed000LayerNorm  y = weight * (x - mean) / (std + eps) + bias, std unbiased (/ (D-1))  (seed 000's code)
    SublayerConnection, by `placement` (Norm = the norm above, F = the sublayer):
        post     Norm(x + Dropout(F(x)))     the paper and seed 001 (default)
        pre      x + Dropout(F(Norm(x)))     GPT-2, Llama (with a final norm after the stack)
        seed000  x + Dropout(Norm(F(x)))     seed000's code
        seed003  x + Norm(F(x))              seed003's code (no dropout)

Seed 001 uses keras.layers.LayerNormalization(epsilon=1e-6); ours is the same formula written out, with the
run's eps (1e-5 by default, as torch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import keras
from keras import ops

PACKAGE = "scratchformer"
PLACEMENTS = ("post", "pre", "seed000", "seed003")  # config/model.py's NormPlacement


@keras.saving.register_keras_serializable(package=PACKAGE)
class LayerNorm(keras.layers.Layer):
    """Normalise each vector to zero mean and unit variance, then scale (weight) and shift (bias)."""

    def __init__(self, d_model: int, eps: float = 1e-5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.d_model, self.eps = d_model, eps
        self.weight = self.add_weight(shape=(d_model,), initializer="ones", name="weight")  # gamma
        self.bias = self.add_weight(shape=(d_model,), initializer="zeros", name="bias")  # beta
        self.built = True

    def call(self, x: Any) -> Any:  # (..., D) -> (..., D)
        mean = ops.mean(x, axis=-1, keepdims=True)  # (..., 1)
        var = ops.mean(ops.square(x - mean), axis=-1, keepdims=True)  # (..., 1), biased, as torch
        return (x - mean) / ops.sqrt(var + self.eps) * self.weight + self.bias

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        yield prefix + "weight", self.weight, False
        yield prefix + "bias", self.bias, False

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "d_model": self.d_model, "eps": self.eps}


@keras.saving.register_keras_serializable(package=PACKAGE)
class RMSNorm(keras.layers.Layer):
    """Divide each vector by its root mean square, then scale; in float32 whatever the input dtype."""

    def __init__(self, d_model: int, eps: float = 1e-6, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.d_model, self.eps = d_model, eps
        self.weight = self.add_weight(shape=(d_model,), initializer="ones", name="weight")  # gamma; no beta
        self.built = True

    def call(self, x: Any) -> Any:  # (..., D) -> (..., D)
        x32 = ops.cast(x, "float32")
        y = x32 * ops.rsqrt(ops.mean(ops.square(x32), axis=-1, keepdims=True) + self.eps)  # (..., D)
        return self.weight * ops.cast(y, x.dtype)

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        yield prefix + "weight", self.weight, False

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "d_model": self.d_model, "eps": self.eps}


@keras.saving.register_keras_serializable(package=PACKAGE)
class Seed000LayerNorm(LayerNorm):
    """Seed 000's LayerNorm: the unbiased std (sum of squares / (D - 1)), eps added to the std (model/norm.py)."""

    def call(self, x: Any) -> Any:  # (..., D) -> (..., D)
        mean = ops.mean(x, axis=-1, keepdims=True)  # (..., 1)
        std = ops.sqrt(ops.sum(ops.square(x - mean), axis=-1, keepdims=True) / (self.d_model - 1))  # (..., 1)
        return self.weight * (x - mean) / (std + self.eps) + self.bias


# norm_kind -> class
NORMS: dict[str, type[keras.layers.Layer]] = {"layer": LayerNorm, "rms": RMSNorm, "seed000": Seed000LayerNorm}


def make_norm(kind: str, d_model: int, eps: float, name: str = "norm") -> keras.layers.Layer:
    """The norm `kind` names (config.norm_kind), of width D."""
    return NORMS[kind](d_model, eps=eps, name=name)


@keras.saving.register_keras_serializable(package=PACKAGE)
class SublayerConnection(keras.layers.Layer):
    """The residual connection around one sublayer, with its norm where `placement` says (module docstring)."""

    def __init__(self, *, d_model: int, norm_kind: str = "layer", eps: float = 1e-5, dropout: float = 0.0,
                 placement: str = "post", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if placement not in PLACEMENTS:
            raise ValueError(f"unknown norm placement {placement!r}; valid: {', '.join(PLACEMENTS)}")
        self.args = dict(d_model=d_model, norm_kind=norm_kind, eps=eps, dropout=dropout, placement=placement)
        self.norm = make_norm(norm_kind, d_model, eps)
        self.dropout = keras.layers.Dropout(dropout)
        self.placement = placement
        self.built = True

    def call(self, x: Any, sublayer: Callable[[Any], Any], training: bool = False) -> Any:  # (B, L, D) -> same
        if self.placement == "pre":
            return x + self.dropout(sublayer(self.norm(x)), training=training)  # x + Dropout(F(Norm(x)))
        if self.placement == "seed000":
            return x + self.dropout(self.norm(sublayer(x)), training=training)  # x + Dropout(Norm(F(x)))
        if self.placement == "seed003":
            return x + self.norm(sublayer(x))  # x + Norm(F(x))
        return self.norm(x + self.dropout(sublayer(x), training=training))  # post: Norm(x + Dropout(F(x)))

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        yield from self.norm.torch_variables(prefix + "norm.")

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self.args}

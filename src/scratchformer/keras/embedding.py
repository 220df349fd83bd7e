"""Input layer in Keras (twin of model/embedding.py): token embedding x sqrt(d_model) + positions, then dropout.

    TokenEmbedding                 (B, L) ids          -> (B, L, D)   lookup, scaled by sqrt(D) (section 3.4)
    SinusoidalPositionalEncoding   (B, L) positions    -> (B, L, D)   PE(pos, 2i) = sin(pos / 10000^(2i/D)),
                                                                      PE(pos, 2i+1) = cos(...)   (section 3.5)
    LearnedPositionalEmbedding     (B, L) positions    -> (B, L, D)   a trained table (Table 3, row E)
    InputLayer                     the sum of the above and dropout

Seed 001's `PositionalEncoding` adds the table inside the layer; ours looks positions up and InputLayer adds them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import keras
import numpy as np
from keras import ops

PACKAGE = "scratchformer"


def sinusoid_table(max_len: int, d_model: int, layout: str = "interleaved") -> np.ndarray:
    """(max_len, D) float32 table of the paper's sinusoids, computed in float64 as model/embedding.py does.

    interleaved (paper, seed 001): dims 0,2,4,... are sin and 1,3,5,... are cos.
    concat (Marian, fairseq): the first D/2 dims are sin, the last D/2 are cos."""
    pos = np.arange(max_len, dtype=np.float64)[:, None]  # (max_len, 1)
    n_sin = (d_model + 1) // 2
    i = np.arange(n_sin, dtype=np.float64)[None, :]  # (1, D/2)
    angle = pos / np.power(10000.0, 2 * i / d_model)  # (max_len, D/2): pos / 10000^(2i/D)
    table = np.zeros((max_len, d_model), dtype=np.float64)
    if layout == "interleaved":
        table[:, 0::2] = np.sin(angle)
        table[:, 1::2] = np.cos(angle[:, : d_model // 2])
    elif layout == "concat":
        table[:, :n_sin] = np.sin(angle)
        table[:, n_sin:] = np.cos(angle[:, : d_model - n_sin])
    else:
        raise ValueError(f"unknown sinusoid layout {layout!r}")
    return table.astype(np.float32)


@keras.saving.register_keras_serializable(package=PACKAGE)
class TokenEmbedding(keras.layers.Layer):
    """A lookup table of V vectors of width D, multiplied by sqrt(D) as in the paper. `weight` is (V, D), as
    torch's; the generator reads it too when embeddings are tied."""

    def __init__(self, vocab_size: int, d_model: int, pad_id: int | None = None, scale: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.vocab_size, self.d_model, self.pad_id, self.use_scale = vocab_size, d_model, pad_id, scale
        self.scale = math.sqrt(d_model) if scale else 1.0
        init = keras.initializers.RandomNormal(stddev=d_model**-0.5)  # after scaling: unit variance
        self.weight = self.add_weight(shape=(vocab_size, d_model), initializer=init, name="weight")
        if pad_id is not None:
            self.weight.assign(ops.where(ops.expand_dims(ops.arange(vocab_size) == pad_id, 1), 0.0, self.weight))
        self.built = True

    def call(self, ids: Any) -> Any:
        return ops.take(self.weight, ids, axis=0) * self.scale  # (B, L) -> (B, L, D)

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        yield prefix + "weight", self.weight, False

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "vocab_size": self.vocab_size, "d_model": self.d_model,
                "pad_id": self.pad_id, "scale": self.use_scale}


@keras.saving.register_keras_serializable(package=PACKAGE)
class SinusoidalPositionalEncoding(keras.layers.Layer):
    """Fixed sinusoids, looked up by position; no weights (the table is rebuilt from its config, not saved)."""

    def __init__(self, d_model: int, max_len: int, layout: str = "interleaved", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.d_model, self.max_len, self.layout = d_model, max_len, layout
        self.table = sinusoid_table(max_len, d_model, layout)  # (max_len, D), a numpy constant
        self.built = True

    def call(self, positions: Any) -> Any:
        return ops.take(ops.convert_to_tensor(self.table), positions, axis=0)  # (B, L) -> (B, L, D)

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        return iter(())  # a buffer in torch, not saved there either

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "d_model": self.d_model, "max_len": self.max_len, "layout": self.layout}


@keras.saving.register_keras_serializable(package=PACKAGE)
class LearnedPositionalEmbedding(keras.layers.Layer):
    """One trained vector per position."""

    def __init__(self, d_model: int, max_len: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.d_model, self.max_len = d_model, max_len
        self.weight = self.add_weight(shape=(max_len, d_model), name="weight",
                                      initializer=keras.initializers.RandomNormal(stddev=0.02))
        self.built = True

    def call(self, positions: Any) -> Any:
        return ops.take(self.weight, positions, axis=0)  # (B, L) -> (B, L, D)

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        yield prefix + "weight", self.weight, False

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "d_model": self.d_model, "max_len": self.max_len}


@keras.saving.register_keras_serializable(package=PACKAGE)
class InputLayer(keras.layers.Layer):
    """x = Dropout(TokenEmbedding(ids) + PositionalEncoding(positions)). `token`: a TokenEmbedding to share (tied
    source and target embeddings), else a new one."""

    def __init__(self, *, vocab_size: int, d_model: int, max_len: int, positions: str = "sinusoidal",
                 dropout: float = 0.1, pad_id: int | None = 0, scale: bool = True,
                 token: TokenEmbedding | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.args = dict(vocab_size=vocab_size, d_model=d_model, max_len=max_len, positions=positions,
                         dropout=dropout, pad_id=pad_id, scale=scale)
        self.max_len = max_len
        self.token = token if token is not None else TokenEmbedding(vocab_size, d_model, pad_id, scale, name="token")
        if positions == "learned":
            self.position: keras.layers.Layer = LearnedPositionalEmbedding(d_model, max_len, name="position")
        else:
            layout = "concat" if positions == "sinusoidal-concat" else "interleaved"
            self.position = SinusoidalPositionalEncoding(d_model, max_len, layout, name="position")
        self.dropout = keras.layers.Dropout(dropout)
        self.built = True

    def call(self, ids: Any, offset: int = 0, training: bool = False) -> Any:
        # ids: (B, L); positions offset, offset+1, ... (offset > 0: continuing a prefix)
        x = self.token(ids)  # (B, L, D)
        positions = ops.expand_dims(ops.arange(offset, offset + ops.shape(ids)[1]), 0)  # (1, L)
        x = x + self.position(positions)  # (B, L, D)
        return self.dropout(x, training=training)  # (B, L, D)

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        yield from self.token.torch_variables(prefix + "token.")
        yield from self.position.torch_variables(prefix + "position.")

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self.args}

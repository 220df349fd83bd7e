"""Position-wise feed-forward network in Keras (twin of model/feedforward.py; section 3.3).

    mlp    FFN(x) = act(x W_1 + b_1) W_2 + b_2                 (B, L, D) -> (B, L, d_ff) -> (B, L, D)   (the paper)
    gated  FFN(x) = (act(x W_gate) * (x W_up)) W_2             W_gate and W_up stacked in w_1 (D -> 2 d_ff)

Seed 001 writes the mlp as Dense(dff, activation="relu") then Dense(d_model): the same two matrices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import keras
from keras import ops

from scratchformer.keras.attention import dense, dense_variables

PACKAGE = "scratchformer"

# the names of config/model.py's Activation Literal -> the Keras function
ACTIVATIONS: dict[str, Callable[[Any], Any]] = {
    "relu": ops.relu,
    "gelu": lambda x: ops.gelu(x, approximate=False),  # exact (erf), as torch's nn.GELU()
    "gelu-tanh": lambda x: ops.gelu(x, approximate=True),
    "silu": ops.silu,  # x * sigmoid(x), "swish"
}


@keras.saving.register_keras_serializable(package=PACKAGE)
class PositionwiseFeedForward(keras.layers.Layer):
    """The FFN box, `gated=False` (the paper's two matrices) or `gated=True` (GLU: three)."""

    def __init__(self, *, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0,
                 bias: bool = True, gated: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.args = dict(d_model=d_model, d_ff=d_ff, activation=activation, dropout=dropout, bias=bias, gated=gated)
        self.d_ff, self.gated = d_ff, gated
        self.w_1 = dense(2 * d_ff if gated else d_ff, d_model, bias, "w_1")  # expand: D -> d_ff ([gate; up])
        self.activation = ACTIVATIONS[activation]
        self.dropout = keras.layers.Dropout(dropout)
        self.w_2 = dense(d_model, d_ff, bias, "w_2")  # contract: d_ff -> D
        self.built = True

    def call(self, x: Any, training: bool = False) -> Any:
        if self.gated:
            both = self.w_1(x)  # (B, L, 2 d_ff)
            h = self.activation(both[..., : self.d_ff]) * both[..., self.d_ff:]  # (B, L, d_ff)
        else:
            h = self.activation(self.w_1(x))  # (B, L, d_ff)
        return self.w_2(self.dropout(h, training=training))  # (B, L, D)

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        yield from dense_variables(self.w_1, prefix + "w_1.")
        yield from dense_variables(self.w_2, prefix + "w_2.")

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self.args}

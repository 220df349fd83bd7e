"""Shared by the Keras port's tests (`make test-keras`): they need keras and tensorflow, the `keras` extra
(pip install 'scratchformer[keras]'); without them every test here is skipped, saying so."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from torch import nn

from scratchformer import ModelConfig, build_model

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # seed 001's backend
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up notices are not test output
SKIP_REASON = "the Keras port needs keras and tensorflow: pip install 'scratchformer[keras]' (or make test-keras)"


def require_keras() -> None:
    """Skip the calling test module unless keras (3) and tensorflow import."""
    pytest.importorskip("tensorflow", reason=SKIP_REASON)
    pytest.importorskip("keras", minversion="3", reason=SKIP_REASON)


def copy_into(keras_layer, torch_module: nn.Module, prefix: str = "") -> None:
    """The torch twin's weights into the Keras box, by the names its torch_variables() gives."""
    from scratchformer.keras import load_state

    state = {k: v.detach().numpy() for k, v in torch_module.state_dict().items()}
    if hasattr(keras_layer, "model_config"):
        load_state(keras_layer, state)
        return
    for name, variable, transposed in keras_layer.torch_variables(prefix):
        variable.assign(state[name].T if transposed else state[name])


def tiny_pair(seed: int = 0, vocab: int = 23, double: bool = True, **overrides):
    """(torch EncoderDecoder in eval mode, the Keras twin with the same weights) of the tiny preset; `double`d
    linear weights keep greedy outputs varied (tests/conftest.py's tiny_seq2seq does the same)."""
    from scratchformer.keras import build_keras_model, load_state

    torch.manual_seed(seed)
    config = ModelConfig.preset("tiny", src_vocab_size=vocab, tgt_vocab_size=vocab, max_len=64, **overrides)
    model = build_model(config).eval()
    with torch.no_grad():
        for m in model.modules() if double else ():
            if isinstance(m, nn.Linear):
                m.weight.mul_(2.0)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    return model, load_state(build_keras_model(config), state)


def padded(seqs, pad: int = 0) -> np.ndarray:
    out = np.full((len(seqs), max(map(len, seqs))), pad, dtype=np.int64)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = s
    return out


@pytest.fixture(scope="session")
def keras_helpers():
    """copy_into, tiny_pair and padded, for the test modules (conftest files are not importable by name)."""
    return copy_into, tiny_pair, padded

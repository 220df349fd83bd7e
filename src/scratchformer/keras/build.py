"""A ModelConfig -> the Keras model; our weights into it; a run directory -> a Keras model, without torch.

    check_supported(config)        one-line ConfigError naming the first field the Keras port does not have
    build_keras_model(config)      EncoderDecoder (keras.Model), freshly initialised
    load_state(model, state)       our state dict (numpy arrays, torch names) -> the Keras variables
    from_run(run_dir)              config.json + model.safetensors (read with safetensors.numpy) -> the model

Supported: arch encoder-decoder; every norm placement and norm kind (seed 000's LayerNorm too); sinusoidal,
sinusoidal-concat and learned positions; all four activations, mlp and gated FFNs; biases on or off; tied or untied
embeddings; d_k / d_v / n_kv_heads. Not (yet): rotary positions, the encoder-only and decoder-only architectures,
BERT's token types and embedding norm, task heads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from scratchformer.config import ModelConfig
from scratchformer.errors import N_, CheckpointError, ConfigError
from scratchformer.keras.transformer import EncoderDecoder

# runs/layout.py's names for these two files (runs/ imports torch, which this package must not): a test checks them
CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"


def check_supported(c: ModelConfig) -> None:
    """One-line ConfigError for the first field of `c` the Keras port cannot build."""
    problems = [
        (c.arch != "encoder-decoder", N_("arch={arch!r}: the Keras port builds the encoder-decoder only")),
        (c.positions == "rope", N_("positions='rope': the Keras port has sinusoidal, sinusoidal-concat and learned "
                                   "positions")),
        (c.type_vocab_size > 0, N_("type_vocab_size={type_vocab_size}: the Keras port has no token-type embeddings")),
        (c.embedding_norm, N_("embedding_norm=true: the Keras port has no embedding norm")),
        (c.head is not None, N_("head={head!r}: the Keras port has no task heads")),
    ]
    for bad, message in problems:
        if bad:
            raise ConfigError(message, arch=c.arch, type_vocab_size=c.type_vocab_size, head=c.head)


def build_keras_model(config: ModelConfig | dict[str, Any]) -> EncoderDecoder:
    """The Keras model a ModelConfig (or its dict) names; refused in one line where the port lacks a field."""
    c = config if isinstance(config, ModelConfig) else ModelConfig.from_dict(dict(config))
    check_supported(c)
    return EncoderDecoder(c, name="encoder_decoder")


def tied_aliases(c: ModelConfig) -> set[str]:
    """Names a torch state dict may hold twice for one tied matrix (the saved file keeps the first only)."""
    names = {"generator.proj.weight"} if c.tie_embeddings else set()
    if c.tie_embeddings and c.src_vocab_size == c.tgt_vocab_size:
        names.add("tgt_embed.token.weight")
    return names


def load_state(model: EncoderDecoder, state: dict[str, np.ndarray], source: str = "the weights") -> EncoderDecoder:
    """Copy our torch-named weights (numpy, any float dtype) into the Keras variables, transposing Linear weights
    ((out, in) -> Dense's (in, out)). Every name and shape is checked before the first copy."""
    pairs = list(model.torch_variables())
    wanted = {name for name, _, _ in pairs}
    missing = sorted(wanted - set(state))
    if missing:
        raise CheckpointError(N_("{source}: missing tensors {missing}: the weights come from another config"),
                              source=source, missing=missing[:3])
    unexpected = sorted(set(state) - wanted - tied_aliases(model.model_config))
    if unexpected:
        raise CheckpointError(N_("{source}: unexpected tensors {unexpected}: the weights come from another config "
                                 "or architecture"), source=source, unexpected=unexpected[:3])
    values = []
    for name, variable, transposed in pairs:
        value = np.asarray(state[name], dtype=np.float32)
        value = value.T if transposed else value
        if tuple(value.shape) != tuple(variable.shape):
            raise CheckpointError(N_("{source}: tensor {name} has shape {shape} but the config builds "
                                     "{shape2}{value}"), source=source, name=name, shape=tuple(state[name].shape),
                                  shape2=tuple(variable.shape), value=' (transposed)' if transposed else '')
        if not np.isfinite(value).all():
            raise CheckpointError(N_("{source}: tensor {name} holds non-finite values (nan or inf)"), source=source,
                                  name=name)
        values.append(value)
    for (_, variable, _), value in zip(pairs, values):
        variable.assign(value)
    return model


def read_state(path: str | Path) -> dict[str, np.ndarray]:
    """The tensors of one safetensors file as numpy arrays, or a one-line CheckpointError."""
    from safetensors.numpy import load_file

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(N_("{path} is missing: the run directory holds no weights (was training finished?)"),
                              path=path)
    try:
        return load_file(str(path))
    except Exception as e:  # a truncated or foreign file
        raise CheckpointError(N_("{path} is not a readable safetensors file: {e}"), path=path, e=e) from None


def from_run(run_dir: str | Path, weights: str | Path | None = None) -> EncoderDecoder:
    """The Keras model of a run directory: its config.json, and model.safetensors (or `weights`), without torch."""
    run_dir = Path(run_dir)
    if not (run_dir / CONFIG_FILE).is_file():
        raise CheckpointError(N_("{value} is missing: not a scratchformer run directory"), value=run_dir / CONFIG_FILE)
    model = build_keras_model(ModelConfig.load(run_dir / CONFIG_FILE))
    path = Path(weights) if weights is not None else run_dir / WEIGHTS_FILE
    return load_state(model, read_state(path), str(path))

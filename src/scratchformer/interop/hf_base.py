"""The shared base of the Hugging Face loaders (one file per family: hf_bert, hf_gpt2, hf_marian): a Link from
one of our parameters to Hugging Face tensors, the Family interface each model type fills in, the activation
names, and the readers of config.json and weight files. The public entry points are in interop/huggingface.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from scratchformer.config import ModelConfig, regular_file
from scratchformer.config.fields import loads_json
from scratchformer.errors import N_, ConfigError
from scratchformer.model.feedforward import ACTIVATIONS

# Hugging Face activation names -> ours; and back (the first HF name listed for each of ours): both read from the
# one table of activations, model/feedforward.py's ACTIVATIONS.
ACT_IN = {hf: ours for ours, act in ACTIVATIONS.items() for hf in act.hf}
ACT_OUT = {ours: act.hf[0] for ours, act in ACTIVATIONS.items()}


@dataclass(frozen=True)
class Link:
    """One of our parameters and the Hugging Face tensor(s) it holds (names without the model prefix)."""

    ours: str
    theirs: tuple[str, ...]  # several: stacked row-wise in ours (q, k, v -> w_qkv)
    layout: str = "linear"  # "linear" | "conv1d" (GPT-2: weight stored (in, out)) | "row" (stored (1, n))
    optional: bool = False  # absent from the file -> zeros (as Hugging Face does for final_logits_bias)
    rows: tuple[int, ...] | None = None  # rows of each of `theirs` when they differ (GQA's q, k, v); None: equal


def to_ours(t: Tensor, layout: str) -> Tensor:
    """A Hugging Face tensor in our layout."""
    if layout == "conv1d" and t.dim() == 2:
        return t.t()
    return t.reshape(-1) if layout == "row" else t


def to_theirs(t: Tensor, layout: str) -> Tensor:
    """One of our tensors in the Hugging Face layout."""
    if layout == "conv1d" and t.dim() == 2:
        return t.t()
    return t.reshape(1, -1) if layout == "row" else t


def pair(ours: str, theirs: str | tuple[str, ...], layout: str = "linear", bias: bool = True,
         rows: tuple[int, ...] | None = None) -> list[Link]:
    """weight (and bias) links of one linear map or norm."""
    names = (theirs,) if isinstance(theirs, str) else theirs
    kinds = ("weight", "bias") if bias else ("weight",)
    return [Link(f"{ours}.{k}", tuple(f"{n}.{k}" for n in names), layout, rows=rows) for k in kinds]


def split_rows(t: Tensor, link: Link) -> tuple[Tensor, ...]:
    """One of our stacked tensors cut back into the Hugging Face tensors of `link`."""
    return t.split(list(link.rows)) if link.rows else t.chunk(len(link.theirs), dim=0)


def classic_problems(c: ModelConfig, model_type: str) -> list[str]:
    """What BERT, GPT-2 and Marian (the paper's boxes with biases) cannot hold, one phrase each."""
    checks = (
        (c.head_dim_k * c.n_heads == c.d_model and c.head_dim_v == c.head_dim_k,
         "d_k / d_v (Hugging Face needs n_heads * d_k = n_heads * d_v = d_model)"),
        (c.bias, "bias=False (the Hugging Face layers have biases)"),
        (c.kv_heads == c.n_heads, f"n_kv_heads={c.n_kv_heads} ({model_type} has as many key/value heads as queries)"),
        (c.ffn_kind == "mlp", f"ffn_kind={c.ffn_kind!r} ({model_type} has a two-matrix FFN)"),
        (c.norm_kind == "layer", f"norm_kind={c.norm_kind!r} ({model_type} uses LayerNorm)"),
        (c.activation in ACT_OUT, f"activation={c.activation!r}"),
    )
    return [p for ok, p in checks if not ok]


class Family:
    """How one Hugging Face model type reads and writes: config fields, tensor names, prefixes."""

    model_type = ""
    arch = ""  # our arch
    prefixes: tuple[str, ...] = ()  # stripped on import (e.g. "bert." of BertForMaskedLM)
    export_archs: dict[str, str] = {}  # HF class name -> tensor name prefix written on export

    def config(self, hf: dict[str, Any], need: Any) -> dict[str, Any]:
        """Our ModelConfig fields from a Hugging Face config.json; `need(key)` reads a required int."""
        raise NotImplementedError

    def links(self, c: ModelConfig) -> list[Link]:
        """Every parameter of a model with config `c` and the Hugging Face tensor(s) it holds."""
        raise NotImplementedError

    def normalise(self, state: dict[str, Tensor], hf: dict[str, Any]) -> dict[str, Tensor]:
        """The file's tensors under the names `links` asks for (old spellings, shared matrices)."""
        return state

    def problems(self, c: ModelConfig) -> list[str]:
        """What in `c` this family cannot express, one phrase each (empty: it can be exported)."""
        raise NotImplementedError

    def hf_config(self, c: ModelConfig) -> dict[str, Any]:
        """The Hugging Face config.json fields of `c` (model_type and architectures added by the caller)."""
        raise NotImplementedError


def activation(name: str) -> str:
    """Our name of a Hugging Face activation, or a one-line ConfigError naming the supported ones."""
    if not isinstance(name, str) or name not in ACT_IN:
        raise ConfigError(N_("activation {name!r} is not supported (supported: {ACT_IN})"), name=name,
                          ACT_IN=', '.join(ACT_IN))
    return ACT_IN[name]


# -- reading --------------------------------------------------------------------------------------------------
def read_json(file: Path) -> dict[str, Any]:
    """The JSON object in `file`, or a one-line ConfigError (missing, a FIFO, not JSON, not an object)."""
    regular_file(file)  # a FIFO would block the read for ever
    if not file.is_file():
        raise ConfigError(N_("{file} does not exist (a Hugging Face model folder holds config.json and weights)"),
                          file=file)
    try:
        data = loads_json(file.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(N_("{file} is not valid JSON: {e}"), file=file, e=e) from None
    if not isinstance(data, dict):
        raise ConfigError(N_("{file} must hold a JSON object, got {name}"), file=file, name=type(data).__name__)
    return data


def load_tensors(file: Path) -> dict[str, Tensor]:
    """All tensors of one weights file (or of the shards an *.index.json lists), on the CPU."""
    try:
        if file.name.endswith(".index.json"):
            shards = sorted(set(read_json(file).get("weight_map", {}).values()))
            state: dict[str, Tensor] = {}
            for shard in shards:
                state.update(load_tensors(file.parent / shard))
            return state
        if file.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(file))
        return torch.load(file, map_location="cpu", weights_only=True)
    except ConfigError:
        raise
    except Exception as e:  # corrupt or truncated file: say which, in one line
        raise ConfigError(N_("{file} cannot be read as a weights file: {name}: {value}"), file=file,
                          name=type(e).__name__, value=str(e).splitlines()[0] if str(e) else '') from None


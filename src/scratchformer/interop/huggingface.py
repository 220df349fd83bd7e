"""Weights to and from Hugging Face model folders: BERT, GPT-2, Marian (OPUS-MT) and Llama, without `transformers`;
and Llama-family GGUF files (interop/gguf.py reads them).

    model = from_pretrained("models/opus-mt-en-de")   # a LOCAL folder: config.json + model.safetensors
    save_pretrained(model, "out/")                     # loads in transformers.AutoModel... with the same outputs

How each family maps onto our switches (config.json is read by hand; the network is never used):

    family  arch             norm  final norm   positions          activation   input layer
    BERT    encoder          post  no           learned            gelu         + token types, LayerNorm, eps 1e-12
    GPT-2   decoder          pre   yes (ln_f)   learned            gelu-tanh    tied lm_head, no generator bias
    Marian  encoder-decoder  post  no           sinusoidal-concat  silu (swish) x sqrt(D), shared; final_logits_bias
    Llama   decoder          pre   yes (RMS)    rope (+ scaling)   gated silu   no biases; GQA (n_kv_heads)

Weight layouts. BERT and Marian keep W^Q, W^K, W^V in three nn.Linear; our self-attention stacks them row-wise
into `w_qkv` ([q; k; v]) and cross-attention into `w_q` and `w_kv` ([k; v]). GPT-2's Conv1D stores (in, out),
the transpose of nn.Linear, and its `c_attn` already stacks [q | k | v] along the output axis.
Marian's sinusoid table (first half sin, second half cos, frequencies 1 / 10000^(2i/D)) equals our
"sinusoidal-concat" to the last bit (tested), so it is computed, not read; the paper's interleaved ones are the
same table with the D dimensions permuted, folded into the weights by hf_marian.interleaved_to_concat (the
`scratchformer export --format hf` path, export/hf.py). Marian starts decoding from pad_id:
`config.decoder_start_id` (and `config.extra["decoder_start_token_id"]`) record it, and the decoder then keeps
target position 0 visible instead of masking it as padding.

One file per family (hf_bert.py, hf_gpt2.py, hf_marian.py, hf_llama.py) fills in hf_base.Family: its config fields, the
tensor names of each of our parameters, what it cannot express. This module reads and writes the folders.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from scratchformer.config import ModelConfig
from scratchformer.errors import N_, ConfigError
from scratchformer.interop.gguf import read_gguf
from scratchformer.interop.hf_base import Family, load_tensors, read_json, split_rows, to_ours, to_theirs
from scratchformer.interop.hf_bert import Bert
from scratchformer.interop.hf_gpt2 import Gpt2
from scratchformer.interop.hf_llama import Llama
from scratchformer.interop.hf_marian import Marian
from scratchformer.model import build_model
from scratchformer.model.transformer import TransformerBase

SUPPORTED = ("bert", "gpt2", "marian", "llama")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
_TOP_LEVEL = ("lm_head.weight", "final_logits_bias")  # outside the base model: never prefixed
_TOKEN_IDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "forced_eos_token_id")

FAMILIES: dict[str, Family] = {f.model_type: f for f in (Bert(), Gpt2(), Marian(), Llama())}


def _family_of(hf: dict[str, Any], file: Path) -> Family:
    """The Family of a config.json (by model_type, else by its class name), or a one-line ConfigError."""
    model_type = hf.get("model_type")
    if model_type is None:  # very old config.json files name only the class
        archs = hf.get("architectures")
        arch = archs[0].lower() if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
        model_type = next((t for t in SUPPORTED if arch.startswith(t)), None)
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        raise ConfigError(N_("{file}: model_type {model_type!r} is not supported; supported model types: {SUPPORTED}"),
                          file=file, model_type=model_type, SUPPORTED=', '.join(SUPPORTED))
    return FAMILIES[model_type]


def config_from_hf(hf: dict[str, Any], file: str | Path = "config.json", fused: bool = True) -> ModelConfig:
    """A Hugging Face config.json (as a dict) -> our ModelConfig; Hugging Face's token ids go to `extra`."""
    file = Path(file)
    family = _family_of(hf, file)

    def need(key: str) -> Any:  # every required key is a size or a token id: an int
        if hf.get(key) is None:
            raise ConfigError(N_("{file}: {model_type} config has no {key!r}"), file=file, model_type=family.model_type,
                              key=key)
        if not isinstance(hf[key], int) or isinstance(hf[key], bool):
            raise ConfigError(N_("{file}: {key}={hf!r} must be int, got {name}"), file=file, key=key, hf=hf[key],
                              name=type(hf[key]).__name__)
        return hf[key]

    try:
        fields = family.config(hf, need)
        extra = {"source": "huggingface", "hf_model_type": family.model_type,
                 "hf_architectures": hf.get("architectures"), **{k: hf.get(k) for k in _TOKEN_IDS if k in hf}}
        if family.arch == "encoder-decoder":
            extra["decoder_start_token_id"] = fields["decoder_start_id"]
        return ModelConfig(**fields, fused=fused, extra=extra)
    except ConfigError as e:
        if str(e).startswith(str(file)):
            raise e from None
        raise ConfigError(N_("{file}: {error}"), file=file, error=e) from None
    except (TypeError, AttributeError, KeyError, IndexError) as e:  # a value of a type no family reads
        raise ConfigError(N_("{file}: a value of the wrong type ({name}: {e})"), file=file, name=type(e).__name__,
                          e=e) from None


def from_pretrained(path: str | Path, fused: bool = True) -> TransformerBase:
    """A local Hugging Face folder (config.json + model.safetensors | pytorch_model.bin) -> our model, eval mode.

    BERT -> EncoderOnly (same last hidden states), GPT-2 and Llama -> DecoderOnly (same logits), Marian ->
    EncoderDecoder (same logits). Heads we have no box for (BERT's pooler and MLM head) are ignored.
    A .gguf file (a Llama-family model, quantised or not) goes to interop/gguf.py.
    """
    folder = Path(path)
    if folder.suffix == ".gguf" and folder.is_file():
        gguf = read_gguf(folder)
        return model_from_state(FAMILIES["llama"], config_from_hf(gguf.hf_config, folder, fused), gguf.state,
                                gguf.hf_config, str(folder))
    if not folder.is_dir():
        raise ConfigError(N_("{folder} is not a folder: from_pretrained reads a local Hugging Face model folder "
                             "(config.json + model.safetensors) or a .gguf file, and never downloads"), folder=folder)
    config_file = folder / "config.json"
    hf = read_json(config_file)
    family = _family_of(hf, config_file)
    config = config_from_hf(hf, config_file, fused)
    weights = next((folder / n for n in WEIGHT_FILES if (folder / n).is_file()), None)
    if weights is None:
        raise ConfigError(N_("{folder} has no weights file (looked for {WEIGHT_FILES})"), folder=folder,
                          WEIGHT_FILES=', '.join(WEIGHT_FILES))
    return model_from_state(family, config, load_tensors(weights), hf, str(weights))


def model_from_state(family: Family, config: ModelConfig, state: dict[str, Tensor], hf: dict[str, Any],
                     source: str) -> TransformerBase:
    """Our model of `config` holding the Hugging Face tensors `state` (named as `family` names them; `source`
    names the file in errors), eval mode."""
    weights = source
    for prefix in family.prefixes:
        state = {k.removeprefix(prefix): v for k, v in state.items()}
    state = family.normalise(state, hf)

    model = build_model(config)
    params = dict(model.named_parameters(remove_duplicate=False))
    links = family.links(config)
    missing = [k for link in links if not link.optional for k in link.theirs if k not in state]
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        raise ConfigError(N_("{weights}: missing {n_missing} tensor(s) a {model_type} model with this config.json "
                             "needs: {shown}"), weights=weights, n_missing=len(missing), model_type=family.model_type,
                          shown=shown)
    with torch.no_grad():
        for link in links:
            ours = params[link.ours]
            if any(k not in state for k in link.theirs):  # an optional tensor: Hugging Face uses zeros
                ours.zero_()
                continue
            value = torch.cat([to_ours(state[k], link.layout) for k in link.theirs], dim=0)
            if value.shape != ours.shape:
                raise ConfigError(N_("{weights}: {theirs} has shape {shape}, but config.json implies {shape2} for "
                                     "{ours}"), weights=weights, theirs=' + '.join(link.theirs),
                                  shape=tuple(value.shape), shape2=tuple(ours.shape), ours=link.ours)
            ours.copy_(value)
    return model.eval()


# -- writing --------------------------------------------------------------------------------------------------
def check_expressible(c: ModelConfig, hf_arch: str | None = None) -> tuple[Family, str]:
    """The family and Hugging Face class that hold a model with config `c` (hf_arch None: the family's first),
    or a one-line ConfigError listing everything in `c` that class cannot hold."""
    families = [f for f in FAMILIES.values() if f.arch == c.arch]
    if hf_arch is None:  # the family that can hold it (GPT-2 or Llama for a decoder), else the first, to say why not
        family = next((f for f in families if not f.problems(c)), families[0])
        hf_arch = next(iter(family.export_archs))
    family = next((f for f in families if hf_arch in f.export_archs), None)
    if family is None:
        known = ", ".join(a for f in families for a in f.export_archs)
        raise ConfigError(N_("hf_arch={hf_arch!r} cannot hold a {arch} model; choose one of: {known}"), hf_arch=hf_arch,
                          arch=c.arch, known=known)
    problems = family.problems(c)
    if problems:
        raise ConfigError(N_("config cannot be expressed as {target}: {problems}"), target=hf_arch,
                          problems="; ".join(problems))
    return family, hf_arch


def save_pretrained(model: TransformerBase, path: str | Path, hf_arch: str | None = None,
                    save: Callable[[dict[str, Tensor], Path], None] | None = None) -> Path:
    """Write config.json + model.safetensors that `transformers` loads with the same outputs.

    hf_arch: "BertModel" (encoder), "GPT2LMHeadModel" | "GPT2Model" (decoder), "MarianMTModel"
    (encoder-decoder); None picks the first for the model's arch. Tied matrices are written once, as
    Hugging Face does. Dropout inside the FFN (activation_dropout) has no slot in BERT / GPT-2 and is dropped.
    A model without generator bias writes no final_logits_bias (Marian then uses zeros). `save(tensors, file)`
    writes model.safetensors (None: safetensors' save_file; `export --format hf` passes runs/'s, whose failed
    write is one line).
    """
    c = model.config
    family, hf_arch = check_expressible(c, hf_arch)
    prefix = family.export_archs[hf_arch]

    params = dict(model.named_parameters(remove_duplicate=False))
    tensors: dict[str, Tensor] = {}
    for link in family.links(c):
        if link.ours == "generator.proj.weight" and hf_arch == "GPT2Model":
            continue  # GPT2Model has no lm_head
        if link.optional and link.ours not in params:
            continue  # generator_bias=False: Hugging Face's zeros are the same
        parts = split_rows(params[link.ours].detach(), link)
        for name, part in zip(link.theirs, parts):
            # clone: safetensors refuses tensors that share storage (tied matrices, chunks of w_qkv)
            full = name if name in _TOP_LEVEL else prefix + name
            tensors[full] = to_theirs(part, link.layout).contiguous().clone()
    if c.arch == "encoder" and c.type_vocab_size == 0:  # BERT always has token types: one type, all zeros
        tensors[prefix + "embeddings.token_type_embeddings.weight"] = torch.zeros(1, c.d_model)

    hf = {"architectures": [hf_arch], "model_type": family.model_type, **family.hf_config(c)}
    for key in ("bos_token_id", "eos_token_id"):
        hf.setdefault(key, c.extra.get(key))
    if family.model_type == "gpt2" and "pad_token_id" in c.extra:
        hf["pad_token_id"] = c.extra["pad_token_id"]  # GPT-2 files usually have none: give back what was read

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    if save is None:
        from safetensors.torch import save_file

        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    else:
        save(tensors, folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps(hf, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return folder

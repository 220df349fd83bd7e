"""Weights to and from Hugging Face model folders: BERT, GPT-2 and Marian (OPUS-MT), without `transformers`.

    model = from_pretrained("models/opus-mt-en-de")   # a LOCAL folder: config.json + model.safetensors
    save_pretrained(model, "out/")                     # loads in transformers.AutoModel... with the same outputs

How each family maps onto our switches (config.json is read by hand; the network is never used):

    family  arch             norm  final norm   positions          activation   input layer
    BERT    encoder          post  no           learned            gelu         + token types, LayerNorm, eps 1e-12
    GPT-2   decoder          pre   yes (ln_f)   learned            gelu-tanh    tied lm_head, no generator bias
    Marian  encoder-decoder  post  no           sinusoidal-concat  silu (swish) x sqrt(D), shared; final_logits_bias

Weight layouts. BERT and Marian keep W^Q, W^K, W^V in three nn.Linear; our self-attention stacks them row-wise
into `w_qkv` ([q; k; v]) and cross-attention into `w_q` and `w_kv` ([k; v]). GPT-2's Conv1D stores (in, out),
the transpose of nn.Linear, and its `c_attn` already stacks [q | k | v] along the output axis.
Marian's sinusoid table (first half sin, second half cos, frequencies 1 / 10000^(2i/D)) equals our
"sinusoidal-concat" to the last bit (tested), so it is computed, not read. Marian starts decoding from pad_id:
`config.decoder_start_id` (and `config.extra["decoder_start_token_id"]`) record it, and the decoder then keeps
target position 0 visible instead of masking it as padding.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from scratchformer.config import ModelConfig, regular_file
from scratchformer.errors import ConfigError
from scratchformer.model.build import build_model
from scratchformer.model.transformer import TransformerBase

SUPPORTED = ("bert", "gpt2", "marian")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
# Hugging Face activation names -> ours; and back (the first HF name listed for each of ours).
_ACT_IN = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu-tanh", "gelu_pytorch_tanh": "gelu-tanh",
           "swish": "silu", "silu": "silu"}
_ACT_OUT = {"relu": "relu", "gelu": "gelu", "gelu-tanh": "gelu_new", "silu": "swish"}
_TOP_LEVEL = ("lm_head.weight", "final_logits_bias")  # outside the base model: never prefixed
_TOKEN_IDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "forced_eos_token_id")


@dataclass(frozen=True)
class _Link:
    """One of our parameters and the Hugging Face tensor(s) it holds (names without the model prefix)."""

    ours: str
    theirs: tuple[str, ...]  # several: stacked row-wise in ours (q, k, v -> w_qkv)
    layout: str = "linear"  # "linear" | "conv1d" (GPT-2: weight stored (in, out)) | "row" (stored (1, n))
    optional: bool = False  # absent from the file -> zeros (as Hugging Face does for final_logits_bias)


def _to_ours(t: Tensor, layout: str) -> Tensor:
    if layout == "conv1d" and t.dim() == 2:
        return t.t()
    return t.reshape(-1) if layout == "row" else t


def _to_theirs(t: Tensor, layout: str) -> Tensor:
    if layout == "conv1d" and t.dim() == 2:
        return t.t()
    return t.reshape(1, -1) if layout == "row" else t


def _pair(ours: str, theirs: str | tuple[str, ...], layout: str = "linear", bias: bool = True) -> list[_Link]:
    """weight (and bias) links of one linear map or LayerNorm."""
    names = (theirs,) if isinstance(theirs, str) else theirs
    kinds = ("weight", "bias") if bias else ("weight",)
    return [_Link(f"{ours}.{k}", tuple(f"{n}.{k}" for n in names), layout) for k in kinds]


# -- the three families ---------------------------------------------------------------------------------------
class _Family:
    """How one Hugging Face model type reads and writes: config fields, tensor names, prefixes."""

    model_type = ""
    arch = ""  # our arch
    prefixes: tuple[str, ...] = ()  # stripped on import (e.g. "bert." of BertForMaskedLM)
    export_archs: dict[str, str] = {}  # HF class name -> tensor name prefix written on export

    def config(self, hf: dict[str, Any], need: Any) -> dict[str, Any]:
        raise NotImplementedError

    def links(self, c: ModelConfig) -> list[_Link]:
        raise NotImplementedError

    def normalise(self, state: dict[str, Tensor], hf: dict[str, Any]) -> dict[str, Tensor]:
        return state

    def problems(self, c: ModelConfig) -> list[str]:
        raise NotImplementedError

    def hf_config(self, c: ModelConfig) -> dict[str, Any]:
        raise NotImplementedError


class _Bert(_Family):
    model_type, arch, prefixes = "bert", "encoder", ("bert.",)
    export_archs = {"BertModel": ""}

    def config(self, hf, need):
        if hf.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError(f"position_embedding_type={hf['position_embedding_type']!r} (only 'absolute')")
        if hf.get("is_decoder") or hf.get("add_cross_attention"):
            raise ConfigError("is_decoder / add_cross_attention BERT variants are not supported")
        vocab = need("vocab_size")
        return dict(arch="encoder", src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=need("hidden_size"),
                    n_heads=need("num_attention_heads"), d_ff=need("intermediate_size"),
                    n_encoder_layers=need("num_hidden_layers"), dropout=hf.get("hidden_dropout_prob", 0.1),
                    attention_dropout=hf.get("attention_probs_dropout_prob", 0.1), norm="post", final_norm=False,
                    positions="learned", activation=_activation(hf.get("hidden_act", "gelu")),
                    scale_embeddings=False, max_len=need("max_position_embeddings"),
                    pad_id=hf.get("pad_token_id") or 0, layer_norm_eps=hf.get("layer_norm_eps", 1e-12),
                    type_vocab_size=hf.get("type_vocab_size", 2), embedding_norm=True)

    def links(self, c):
        links = [_Link("embed.token.weight", ("embeddings.word_embeddings.weight",)),
                 _Link("embed.position.weight", ("embeddings.position_embeddings.weight",)),
                 *_pair("embed.norm", "embeddings.LayerNorm")]
        if c.type_vocab_size > 0:
            links.append(_Link("embed.token_type.weight", ("embeddings.token_type_embeddings.weight",)))
        for i in range(c.n_encoder_layers):
            o, t = f"encoder.layers.{i}.", f"encoder.layer.{i}."
            qkv = tuple(f"{t}attention.self.{n}" for n in ("query", "key", "value"))
            links += [*_pair(o + "self_attn.w_qkv", qkv), *_pair(o + "self_attn.w_o", t + "attention.output.dense"),
                      *_pair(o + "sublayer.0.norm", t + "attention.output.LayerNorm"),
                      *_pair(o + "feed_forward.w_1", t + "intermediate.dense"),
                      *_pair(o + "feed_forward.w_2", t + "output.dense"),
                      *_pair(o + "sublayer.1.norm", t + "output.LayerNorm")]
        return links

    def normalise(self, state, hf):
        # Checkpoints from the TensorFlow era name LayerNorm parameters gamma / beta.
        def rename(k: str) -> str:
            if k.endswith("LayerNorm.gamma"):
                return k[: -len("gamma")] + "weight"
            return k[: -len("beta")] + "bias" if k.endswith("LayerNorm.beta") else k

        return {rename(k): v for k, v in state.items()}

    def problems(self, c):
        return [p for cond, p in (
            (c.norm == "post", f"norm={c.norm!r} (BERT is post-norm)"),
            (not c.use_final_norm, "final_norm is on (BERT has no final LayerNorm)"),
            (c.positions == "learned", f"positions={c.positions!r} (BERT learns its positions)"),
            (not c.scale_embeddings, "scale_embeddings=True (BERT does not scale embeddings)"),
            (c.embedding_norm, "embedding_norm=False (BERT always normalises its embeddings)"),
        ) if not cond]

    def hf_config(self, c):
        return dict(vocab_size=c.tgt_vocab_size, hidden_size=c.d_model, num_hidden_layers=c.n_encoder_layers,
                    num_attention_heads=c.n_heads, intermediate_size=c.d_ff, hidden_act=_ACT_OUT[c.activation],
                    hidden_dropout_prob=c.dropout, attention_probs_dropout_prob=c.attention_dropout,
                    max_position_embeddings=c.max_len, type_vocab_size=max(c.type_vocab_size, 1),
                    layer_norm_eps=c.layer_norm_eps, pad_token_id=c.pad_id, position_embedding_type="absolute",
                    is_decoder=False, add_cross_attention=False)


class _Gpt2(_Family):
    model_type, arch, prefixes = "gpt2", "decoder", ("transformer.",)
    export_archs = {"GPT2LMHeadModel": "transformer.", "GPT2Model": ""}

    def config(self, hf, need):
        if not hf.get("scale_attn_weights", True) or hf.get("scale_attn_by_inverse_layer_idx", False):
            raise ConfigError("scale_attn_weights=false or scale_attn_by_inverse_layer_idx=true is not supported "
                              "(our attention always scales by 1/sqrt(d_k))")
        if hf.get("add_cross_attention"):
            raise ConfigError("add_cross_attention=true GPT-2 variants are not supported")
        vocab, d = need("vocab_size"), need("n_embd")
        pad = next((hf[k] for k in ("pad_token_id", "eos_token_id")  # GPT-2 has no pad: pad with EOS, as HF does
                    if isinstance(hf.get(k), int) and 0 <= hf[k] < vocab), 0)
        return dict(arch="decoder", src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d, n_heads=need("n_head"),
                    d_ff=hf.get("n_inner") or 4 * d, n_decoder_layers=need("n_layer"),
                    dropout=hf.get("resid_pdrop", 0.1), attention_dropout=hf.get("attn_pdrop", 0.1), norm="pre",
                    final_norm=True, positions="learned",
                    activation=_activation(hf.get("activation_function", "gelu_new")),
                    tie_embeddings=hf.get("tie_word_embeddings", True), scale_embeddings=False,
                    max_len=need("n_positions"), pad_id=pad, layer_norm_eps=hf.get("layer_norm_epsilon", 1e-5),
                    generator_bias=False)

    def links(self, c):
        links = [_Link("embed.token.weight", ("wte.weight",)), _Link("embed.position.weight", ("wpe.weight",))]
        for i in range(c.n_decoder_layers):
            o, t = f"decoder.layers.{i}.", f"h.{i}."
            links += [*_pair(o + "sublayer.0.norm", t + "ln_1"),
                      *_pair(o + "self_attn.w_qkv", t + "attn.c_attn", "conv1d"),
                      *_pair(o + "self_attn.w_o", t + "attn.c_proj", "conv1d"),
                      *_pair(o + "sublayer.1.norm", t + "ln_2"),
                      *_pair(o + "feed_forward.w_1", t + "mlp.c_fc", "conv1d"),
                      *_pair(o + "feed_forward.w_2", t + "mlp.c_proj", "conv1d")]
        links += _pair("decoder.norm", "ln_f")
        if not c.tie_embeddings:
            links.append(_Link("generator.proj.weight", ("lm_head.weight",)))
        return links

    def problems(self, c):
        return [p for cond, p in (
            (c.norm == "pre", f"norm={c.norm!r} (GPT-2 is pre-norm)"),
            (c.use_final_norm, "final_norm is off (GPT-2 ends with ln_f)"),
            (c.positions == "learned", f"positions={c.positions!r} (GPT-2 learns its positions)"),
            (not c.scale_embeddings, "scale_embeddings=True (GPT-2 does not scale embeddings)"),
            (not c.embedding_norm and c.type_vocab_size == 0, "embedding_norm / type_vocab_size (GPT-2 has neither)"),
            (not c.generator_bias, "generator_bias=True (GPT-2's lm_head has no bias)"),
        ) if not cond]

    def hf_config(self, c):
        return dict(vocab_size=c.tgt_vocab_size, n_embd=c.d_model, n_layer=c.n_decoder_layers, n_head=c.n_heads,
                    n_inner=c.d_ff, n_positions=c.max_len, activation_function=_ACT_OUT[c.activation],
                    resid_pdrop=c.dropout, embd_pdrop=c.dropout, attn_pdrop=c.attention_dropout,
                    layer_norm_epsilon=c.layer_norm_eps, scale_attn_weights=True,
                    scale_attn_by_inverse_layer_idx=False, reorder_and_upcast_attn=False, add_cross_attention=False,
                    tie_word_embeddings=c.tie_embeddings, pad_token_id=c.pad_id)


class _Marian(_Family):
    model_type, arch, prefixes = "marian", "encoder-decoder", ("model.",)
    export_archs = {"MarianMTModel": "model."}

    def config(self, hf, need):
        for a, b in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
            if need(a) != need(b):
                raise ConfigError(f"{a}={hf[a]} differs from {b}={hf[b]} (our config has one value for both)")
        src_vocab = need("vocab_size")
        tgt_vocab = hf.get("decoder_vocab_size") or src_vocab
        share = hf.get("share_encoder_decoder_embeddings", True)
        # Ours ties the source embedding too whenever the vocabularies have one size: only say "tied" when
        # that is what the checkpoint does; otherwise the matrices are copied (equal values, not shared).
        tie = hf.get("tie_word_embeddings", True) and (share or src_vocab != tgt_vocab)
        pad = need("pad_token_id")
        return dict(arch="encoder-decoder", src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab,
                    d_model=need("d_model"), n_heads=need("encoder_attention_heads"), d_ff=need("encoder_ffn_dim"),
                    n_encoder_layers=need("encoder_layers"), n_decoder_layers=need("decoder_layers"),
                    dropout=hf.get("dropout", 0.1), attention_dropout=hf.get("attention_dropout", 0.0),
                    activation_dropout=hf.get("activation_dropout", 0.0), norm="post", final_norm=False,
                    positions="sinusoidal-concat", activation=_activation(hf.get("activation_function", "gelu")),
                    tie_embeddings=tie, scale_embeddings=hf.get("scale_embedding", False),
                    max_len=need("max_position_embeddings"), pad_id=pad, layer_norm_eps=1e-5, generator_bias=True,
                    decoder_start_id=hf.get("decoder_start_token_id", pad))

    def links(self, c):
        links = [_Link("src_embed.token.weight", ("encoder.embed_tokens.weight",)),
                 _Link("tgt_embed.token.weight", ("decoder.embed_tokens.weight",)),
                 _Link("generator.proj.bias", ("final_logits_bias",), "row", optional=True)]
        if c.tie_embeddings and c.shared_vocab:  # one matrix, stored once as `shared`
            links = [_Link("tgt_embed.token.weight", ("shared.weight",)), links[2]]
        if not c.tie_embeddings:
            links.append(_Link("generator.proj.weight", ("lm_head.weight",)))
        for i in range(c.n_encoder_layers):
            o = t = f"encoder.layers.{i}."
            links += [*_pair(o + "self_attn.w_qkv", tuple(f"{t}self_attn.{n}_proj" for n in "qkv")),
                      *_pair(o + "self_attn.w_o", t + "self_attn.out_proj"),
                      *_pair(o + "sublayer.0.norm", t + "self_attn_layer_norm"),
                      *_pair(o + "feed_forward.w_1", t + "fc1"), *_pair(o + "feed_forward.w_2", t + "fc2"),
                      *_pair(o + "sublayer.1.norm", t + "final_layer_norm")]
        for i in range(c.n_decoder_layers):
            o = t = f"decoder.layers.{i}."
            links += [*_pair(o + "self_attn.w_qkv", tuple(f"{t}self_attn.{n}_proj" for n in "qkv")),
                      *_pair(o + "self_attn.w_o", t + "self_attn.out_proj"),
                      *_pair(o + "sublayer.0.norm", t + "self_attn_layer_norm"),
                      *_pair(o + "cross_attn.w_q", t + "encoder_attn.q_proj"),
                      *_pair(o + "cross_attn.w_kv", (t + "encoder_attn.k_proj", t + "encoder_attn.v_proj")),
                      *_pair(o + "cross_attn.w_o", t + "encoder_attn.out_proj"),
                      *_pair(o + "sublayer.1.norm", t + "encoder_attn_layer_norm"),
                      *_pair(o + "feed_forward.w_1", t + "fc1"), *_pair(o + "feed_forward.w_2", t + "fc2"),
                      *_pair(o + "sublayer.2.norm", t + "final_layer_norm")]
        return links

    def normalise(self, state, hf):
        # Files differ in where the embedding lives: `shared` only (newer), `shared` and once per stack (older),
        # or once per stack (unshared vocabularies). Make every name the links may ask for point at it.
        state = dict(state)
        if "shared.weight" in state:
            state.setdefault("encoder.embed_tokens.weight", state["shared.weight"])
            state.setdefault("decoder.embed_tokens.weight", state["shared.weight"])
        elif "decoder.embed_tokens.weight" in state:
            state["shared.weight"] = state["decoder.embed_tokens.weight"]
        if hf.get("tie_word_embeddings", True) and "decoder.embed_tokens.weight" in state:
            state["lm_head.weight"] = state["decoder.embed_tokens.weight"]  # HF ties it, whatever the file holds
        return state

    def problems(self, c):
        return [p for cond, p in (
            (c.norm == "post", f"norm={c.norm!r} (Marian is post-norm)"),
            (not c.use_final_norm, "final_norm is on (Marian has no final LayerNorm)"),
            (c.positions == "sinusoidal-concat", f"positions={c.positions!r} (Marian: 'sinusoidal-concat')"),
            (not c.embedding_norm and c.type_vocab_size == 0, "embedding_norm / type_vocab_size (Marian has neither)"),
            (c.layer_norm_eps == 1e-5, f"layer_norm_eps={c.layer_norm_eps} (Marian's LayerNorm uses 1e-5)"),
            (_start_id(c) is not None, "decoder_start_id is None: set it to the id the decoder starts from "
                                       "(your BOS id; Marian uses pad_id)"),
        ) if not cond]

    def hf_config(self, c):
        shared = c.tie_embeddings and c.shared_vocab
        return dict(vocab_size=c.src_vocab_size, decoder_vocab_size=c.tgt_vocab_size, d_model=c.d_model,
                    encoder_layers=c.n_encoder_layers, decoder_layers=c.n_decoder_layers,
                    encoder_attention_heads=c.n_heads, decoder_attention_heads=c.n_heads, encoder_ffn_dim=c.d_ff,
                    decoder_ffn_dim=c.d_ff, activation_function=_ACT_OUT[c.activation], dropout=c.dropout,
                    attention_dropout=c.attention_dropout, activation_dropout=c.activation_dropout,
                    max_position_embeddings=c.max_len, scale_embedding=c.scale_embeddings,
                    share_encoder_decoder_embeddings=shared, tie_word_embeddings=c.tie_embeddings,
                    pad_token_id=c.pad_id, decoder_start_token_id=_start_id(c), is_encoder_decoder=True,
                    forced_eos_token_id=c.extra.get("forced_eos_token_id"))


FAMILIES: dict[str, _Family] = {f.model_type: f for f in (_Bert(), _Gpt2(), _Marian())}
_BY_ARCH = {f.arch: f for f in FAMILIES.values()}


def _activation(name: str) -> str:
    if not isinstance(name, str) or name not in _ACT_IN:
        raise ConfigError(f"activation {name!r} is not supported (supported: {', '.join(_ACT_IN)})")
    return _ACT_IN[name]


def _start_id(c: ModelConfig) -> int | None:
    return c.decoder_start_id if c.decoder_start_id is not None else c.extra.get("decoder_start_token_id")


# -- reading --------------------------------------------------------------------------------------------------
def _read_json(file: Path) -> dict[str, Any]:
    regular_file(file)  # a FIFO would block the read for ever
    if not file.is_file():
        raise ConfigError(f"{file} does not exist (a Hugging Face model folder holds config.json and weights)")
    try:
        data = json.loads(file.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{file} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{file} must hold a JSON object, got {type(data).__name__}")
    return data


def _load_tensors(file: Path) -> dict[str, Tensor]:
    """All tensors of one weights file (or of the shards an *.index.json lists), on the CPU."""
    try:
        if file.name.endswith(".index.json"):
            shards = sorted(set(_read_json(file).get("weight_map", {}).values()))
            state: dict[str, Tensor] = {}
            for shard in shards:
                state.update(_load_tensors(file.parent / shard))
            return state
        if file.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(file))
        return torch.load(file, map_location="cpu", weights_only=True)
    except ConfigError:
        raise
    except Exception as e:  # corrupt or truncated file: say which, in one line
        raise ConfigError(f"{file} cannot be read as a weights file: {type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}") from None


def _family_of(hf: dict[str, Any], file: Path) -> _Family:
    model_type = hf.get("model_type")
    if model_type is None:  # very old config.json files name only the class
        archs = hf.get("architectures")
        arch = archs[0].lower() if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
        model_type = next((t for t in SUPPORTED if arch.startswith(t)), None)
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        raise ConfigError(f"{file}: model_type {model_type!r} is not supported; supported model types: "
                          f"{', '.join(SUPPORTED)}")
    return FAMILIES[model_type]


def config_from_hf(hf: dict[str, Any], file: str | Path = "config.json", fused: bool = True) -> ModelConfig:
    """A Hugging Face config.json (as a dict) -> our ModelConfig; Hugging Face's token ids go to `extra`."""
    file = Path(file)
    family = _family_of(hf, file)

    def need(key: str) -> Any:  # every required key is a size or a token id: an int
        if hf.get(key) is None:
            raise ConfigError(f"{file}: {family.model_type} config has no {key!r}")
        if not isinstance(hf[key], int) or isinstance(hf[key], bool):
            raise ConfigError(f"{file}: {key}={hf[key]!r} must be int, got {type(hf[key]).__name__}")
        return hf[key]

    try:
        fields = family.config(hf, need)
        extra = {"source": "huggingface", "hf_model_type": family.model_type,
                 "hf_architectures": hf.get("architectures"), **{k: hf.get(k) for k in _TOKEN_IDS if k in hf}}
        if family.arch == "encoder-decoder":
            extra["decoder_start_token_id"] = fields["decoder_start_id"]
        return ModelConfig(**fields, fused=fused, extra=extra)
    except ConfigError as e:
        msg = str(e)
        raise ConfigError(msg if msg.startswith(str(file)) else f"{file}: {msg}") from None
    except (TypeError, AttributeError, KeyError, IndexError) as e:  # a value of a type no family reads
        raise ConfigError(f"{file}: a value of the wrong type ({type(e).__name__}: {e})") from None


def from_pretrained(path: str | Path, fused: bool = True) -> TransformerBase:
    """A local Hugging Face folder (config.json + model.safetensors | pytorch_model.bin) -> our model, eval mode.

    BERT -> EncoderOnly (same last hidden states), GPT-2 -> DecoderOnly (same logits), Marian -> EncoderDecoder
    (same logits). Heads we have no box for (BERT's pooler and MLM head) are ignored.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder: from_pretrained reads a local Hugging Face model folder "
                          "(config.json + model.safetensors) and never downloads")
    config_file = folder / "config.json"
    hf = _read_json(config_file)
    family = _family_of(hf, config_file)
    config = config_from_hf(hf, config_file, fused)
    weights = next((folder / n for n in WEIGHT_FILES if (folder / n).is_file()), None)
    if weights is None:
        raise ConfigError(f"{folder} has no weights file (looked for {', '.join(WEIGHT_FILES)})")
    state = _load_tensors(weights)
    for prefix in family.prefixes:
        state = {k.removeprefix(prefix): v for k, v in state.items()}
    state = family.normalise(state, hf)

    model = build_model(config)
    params = dict(model.named_parameters(remove_duplicate=False))
    links = family.links(config)
    missing = [k for link in links if not link.optional for k in link.theirs if k not in state]
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        raise ConfigError(f"{weights}: missing {len(missing)} tensor(s) a {family.model_type} model with this "
                          f"config.json needs: {shown}")
    with torch.no_grad():
        for link in links:
            ours = params[link.ours]
            if any(k not in state for k in link.theirs):  # an optional tensor: Hugging Face uses zeros
                ours.zero_()
                continue
            value = torch.cat([_to_ours(state[k], link.layout) for k in link.theirs], dim=0)
            if value.shape != ours.shape:
                raise ConfigError(f"{weights}: {' + '.join(link.theirs)} has shape {tuple(value.shape)}, but "
                                  f"config.json implies {tuple(ours.shape)} for {link.ours}")
            ours.copy_(value)
    return model.eval()


# -- writing --------------------------------------------------------------------------------------------------
def _check_expressible(c: ModelConfig, family: _Family, hf_arch: str) -> None:
    problems = family.problems(c)
    if c.head_dim_k * c.n_heads != c.d_model or c.head_dim_v != c.head_dim_k:
        problems.append("d_k / d_v (Hugging Face needs n_heads * d_k = n_heads * d_v = d_model)")
    if not c.bias:
        problems.append("bias=False (the Hugging Face layers have biases)")
    if c.activation not in _ACT_OUT:
        problems.append(f"activation={c.activation!r}")
    if problems:
        raise ConfigError(f"config cannot be expressed as {hf_arch}: " + "; ".join(problems))


def save_pretrained(model: TransformerBase, path: str | Path, hf_arch: str | None = None) -> Path:
    """Write config.json + model.safetensors that `transformers` loads with the same outputs.

    hf_arch: "BertModel" (encoder), "GPT2LMHeadModel" | "GPT2Model" (decoder), "MarianMTModel"
    (encoder-decoder); None picks the first for the model's arch. Tied matrices are written once, as
    Hugging Face does. Dropout inside the FFN (activation_dropout) has no slot in BERT / GPT-2 and is dropped.
    """
    c = model.config
    family = _BY_ARCH[c.arch]
    hf_arch = hf_arch or next(iter(family.export_archs))
    if hf_arch not in family.export_archs:
        known = ", ".join(a for f in FAMILIES.values() for a in f.export_archs)
        raise ConfigError(f"hf_arch={hf_arch!r} cannot hold a {c.arch} model; choose one of: {known}")
    _check_expressible(c, family, hf_arch)
    prefix = family.export_archs[hf_arch]

    params = dict(model.named_parameters(remove_duplicate=False))
    tensors: dict[str, Tensor] = {}
    for link in family.links(c):
        if link.ours == "generator.proj.weight" and hf_arch == "GPT2Model":
            continue  # GPT2Model has no lm_head
        parts = params[link.ours].detach().chunk(len(link.theirs), dim=0)
        for name, part in zip(link.theirs, parts):
            # clone: safetensors refuses tensors that share storage (tied matrices, chunks of w_qkv)
            full = name if name in _TOP_LEVEL else prefix + name
            tensors[full] = _to_theirs(part, link.layout).contiguous().clone()
    if c.arch == "encoder" and c.type_vocab_size == 0:  # BERT always has token types: one type, all zeros
        tensors[prefix + "embeddings.token_type_embeddings.weight"] = torch.zeros(1, c.d_model)

    hf = {"architectures": [hf_arch], "model_type": family.model_type, **family.hf_config(c)}
    for key in ("bos_token_id", "eos_token_id"):
        hf.setdefault(key, c.extra.get(key))
    if family.model_type == "gpt2" and "pad_token_id" in c.extra:
        hf["pad_token_id"] = c.extra["pad_token_id"]  # GPT-2 files usually have none: give back what was read

    from safetensors.torch import save_file

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(hf, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return folder

"""GGUF files (llama.cpp's format) of Llama-family models, read with the `gguf` package: the config, the tensors
dequantised (Q4_0, Q4_1, Q8_0, F16, BF16, F32, ... whatever gguf.quants knows) to float32 under Hugging Face
Llama names, the tokenizer rebuilt from the metadata as a `tokenizers` object, and the chat template.

    gguf = read_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")  # .hf_config, .state, .fields
    tokenizer = gguf_tokenizer(gguf.fields)               # a tokenizers.Tokenizer (byte-level BPE)

Tensor names: token_embd -> embed_tokens, blk.i.attn_norm -> layers.i.input_layernorm, attn_q/k/v/output ->
self_attn.q/k/v/o_proj, ffn_norm -> post_attention_layernorm, ffn_gate/up/down -> mlp.gate/up/down_proj,
output_norm -> norm, output -> lm_head (absent: tied). llama.cpp's converter permutes the rows of attn_q and attn_k
of each head so that its rope can turn adjacent pairs (x0, x1), (x2, x3), ...; Hugging Face (and model/rope.py)
turn the pairs (x_i, x_{i+d/2}) instead. `unpermute` puts the rows back, as transformers' GGUF loader does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from scratchformer.config import regular_file
from scratchformer.errors import N_, ConfigError

_BLOCK_NAMES = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
                "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
# Pre-tokenizer splits by tokenizer.ggml.pre; any other name: GPT-2's own split (ByteLevel's regex), as transformers
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPLITS = {"llama3": _LLAMA3_SPLIT, "llama-v3": _LLAMA3_SPLIT, "llama-bpe": _LLAMA3_SPLIT, "smaug-bpe": _LLAMA3_SPLIT}


@dataclass
class GGUFContents:
    """What a GGUF file holds: a Llama config.json as a dict, the tensors under Hugging Face names, the metadata."""

    hf_config: dict[str, Any]
    state: dict[str, Tensor]
    fields: dict[str, Any]


def _reader(path: Path):
    """A gguf.GGUFReader on `path`, or a one-line ConfigError."""
    regular_file(path)
    if not path.is_file():
        raise ConfigError(N_("{path} does not exist"), path=path)
    try:
        from gguf import GGUFReader
    except ImportError:  # an optional third-party package
        raise ConfigError(N_("reading .gguf files needs the `gguf` package: pip install gguf")) from None
    try:
        return GGUFReader(str(path))
    except Exception as e:  # not GGUF, truncated: say which file, in one line
        raise ConfigError(N_("{path} cannot be read as a GGUF file: {kind}: {e}"), path=path, kind=type(e).__name__,
                          e=str(e)[:200]) from None


def read_fields(reader: Any) -> dict[str, Any]:
    """The metadata as plain Python values (strings, numbers, lists)."""
    return {name: field.contents() for name, field in reader.fields.items()}


def unpermute(w: Tensor, n_heads: int) -> Tensor:
    """Undo llama.cpp's row permutation of attn_q / attn_k: rows (h, d/2, 2) back to (h, 2, d/2)."""
    rows = w.shape[0]
    return w.reshape(n_heads, rows // n_heads // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def _hf_name(name: str) -> str | None:
    base, _, kind = name.rpartition(".")  # "blk.3.attn_q", "weight"
    if base in _TOP_NAMES:
        return f"{_TOP_NAMES[base]}.{kind}"
    parts = base.split(".")
    if len(parts) == 3 and parts[0] == "blk" and parts[2] in _BLOCK_NAMES:
        return f"model.layers.{parts[1]}.{_BLOCK_NAMES[parts[2]]}.{kind}"
    return None


def _metadata(fields: dict[str, Any], path: Path) -> Any:
    """get(key, default, kind): the metadata value `key` as a positive int (kind=int) or a finite number
    (kind=float), else a one-line ConfigError naming the key: the file is not trusted (a 0 would divide, a list
    of per-layer values would not fit one int)."""

    def get(key: str, default: Any = None, kind: type = int) -> Any:
        value = fields.get(key, default)
        if value is None:
            raise ConfigError(N_("{path}: the metadata has no {key}"), path=path, key=key)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind is int and not (number and isinstance(value, int) and value > 0):
            raise ConfigError(N_("{path}: metadata {key}={shown} must be a positive whole number"), path=path, key=key,
                              shown=_shown(value))
        if kind is float and not (number and math.isfinite(value)):
            raise ConfigError(N_("{path}: metadata {key}={shown} must be a finite number"), path=path, key=key,
                              shown=_shown(value))
        return kind(value)

    return get


def _shown(value: Any) -> str:
    return repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."


def _config(fields: dict[str, Any], tensor_names: set[str], path: Path) -> dict[str, Any]:
    """The Llama config.json (as a dict) a GGUF file's metadata describes, its sizes checked against each other."""
    arch = fields.get("general.architecture")
    if arch != "llama":
        raise ConfigError(N_("{path}: general.architecture={arch!r}; only 'llama' GGUF files are supported (Llama "
                             "2/3, SmolLM2, TinyLlama, Mistral)"), path=path, arch=arch)
    meta = _metadata(fields, path)

    def get(key: str, default: Any = None, kind: type = int) -> Any:
        return meta(f"llama.{key}", default, kind)

    heads, d = get("attention.head_count"), get("embedding_length")
    kv_heads = get("attention.head_count_kv", heads)
    if "llama.attention.key_length" not in fields and d % heads:
        raise ConfigError(N_("{path}: embedding_length={d} is not divisible by attention.head_count={heads}"),
                          path=path, d=d, heads=heads)
    head_dim = get("attention.key_length", d // heads)
    if heads % kv_heads or head_dim % 2:
        raise ConfigError(N_("{path}: attention.head_count={heads}, head_count_kv={kv_heads}, "
                             "key_length={head_dim}: the key/value heads must divide the heads, and rope needs an "
                             "even head size"), path=path, heads=heads, kv_heads=kv_heads, head_dim=head_dim)
    if get("rope.dimension_count", head_dim) != head_dim:
        raise ConfigError(N_("{path}: rope over part of each head (rope.dimension_count < {head_dim}) is not "
                             "supported"), path=path, head_dim=head_dim)
    rope: dict[str, Any] = {"rope_type": "default", "rope_theta": get("rope.freq_base", 10000.0, float)}
    scaling = fields.get("llama.rope.scaling.type", "none")
    if scaling == "linear":
        rope.update(rope_type="linear", factor=get("rope.scaling.factor", None, float))
    elif scaling != "none" or "rope_freqs.weight" in tensor_names:
        raise ConfigError(N_("{path}: rope scaling {shown} / rope_freqs is not supported (default and linear are)"),
                          path=path, shown=_shown(scaling))
    tokens = fields.get("tokenizer.ggml.tokens")
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
            "vocab_size": get("vocab_size", len(tokens) if isinstance(tokens, list) and tokens else None),
            "hidden_size": d, "intermediate_size": get("feed_forward_length"), "num_hidden_layers": get("block_count"),
            "num_attention_heads": heads, "num_key_value_heads": kv_heads,
            "head_dim": head_dim, "max_position_embeddings": get("context_length"),
            "rms_norm_eps": get("attention.layer_norm_rms_epsilon", None, float), "rope_parameters": rope,
            "hidden_act": "silu", "tie_word_embeddings": "output.weight" not in tensor_names,
            **{f"{k}_token_id": _token_id(fields, f"tokenizer.ggml.{k}_token_id", path) for k in ("bos", "eos")
               if f"tokenizer.ggml.{k}_token_id" in fields},
            "pad_token_id": _token_id(fields, "tokenizer.ggml.padding_token_id", path)}


def _token_id(fields: dict[str, Any], key: str, path: Path) -> int | None:
    value = fields.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ConfigError(N_("{path}: metadata {key}={shown} must be a token id (a whole number >= 0)"), path=path,
                          key=key, shown=_shown(value))
    return value


def _expected_tensors(hf: dict[str, Any]) -> set[str]:
    """The GGUF tensor names a Llama of config `hf` uses (no biases: llama.cpp's Llama files hold none)."""
    names = {"token_embd.weight", "output_norm.weight", "output.weight"}
    for i in range(hf["num_hidden_layers"]):
        names |= {f"blk.{i}.{part}.weight" for part in _BLOCK_NAMES}
    return names


def _check_rows(name: str, rows: int, heads: int, head_dim: int, path: Path) -> None:
    """attn_q / attn_k must hold heads x head_dim rows before their rows are un-permuted head by head."""
    if rows != heads * head_dim:
        raise ConfigError(N_("{path}: {name} has {rows} rows, but the metadata's {heads} heads of size {head_dim} "
                             "need {value}"), path=path, name=name, rows=rows, heads=heads, head_dim=head_dim,
                          value=heads * head_dim)


def read_gguf(path: str | Path) -> GGUFContents:
    """A GGUF file's config, its tensors dequantised to float32 under Hugging Face names, and its metadata."""
    from gguf.quants import dequantize  # the package is checked by _reader first

    path = Path(path)
    reader = _reader(path)
    fields = read_fields(reader)
    hf = _config(fields, {t.name for t in reader.tensors}, path)
    unused = sorted(t.name for t in reader.tensors if t.name not in _expected_tensors(hf))
    if unused:
        shown = ", ".join(unused[:4]) + (f" and {len(unused) - 4} more" if len(unused) > 4 else "")
        raise ConfigError(N_("{path}: {n_unused} tensor(s) have no place in a Llama model of {num_hidden_layers} "
                             "layers without biases, and would be ignored: {shown}"), path=path, n_unused=len(unused),
                          num_hidden_layers=hf['num_hidden_layers'], shown=shown)
    state: dict[str, Tensor] = {}
    for t in reader.tensors:
        name = _hf_name(t.name)
        if name is None:  # _expected_tensors holds only names _hf_name maps; kept as a guard
            raise ConfigError(N_("{path}: tensor {name!r} has no place in a Llama model"), path=path, name=t.name)
        try:
            array = dequantize(t.data, t.tensor_type)
        except NotImplementedError:
            raise ConfigError(N_("{path}: {name} is stored as {name2}, which gguf cannot dequantise"), path=path,
                              name=t.name, name2=t.tensor_type.name) from None
        w = torch.from_numpy(array.reshape(tuple(reversed(t.shape.tolist()))).copy()).float()  # (out, in)
        if ".attn_q." in t.name or ".attn_k." in t.name:
            heads = hf["num_attention_heads"] if ".attn_q." in t.name else hf["num_key_value_heads"]
            _check_rows(t.name, w.shape[0], heads, hf["head_dim"], path)
            w = unpermute(w, heads)
        state[name] = w
    return GGUFContents(hf, state, fields)


def chat_template(fields: dict[str, Any]) -> str | None:
    """The Jinja chat template the file carries (tokenizer.chat_template), or None."""
    return fields.get("tokenizer.chat_template")


def _byte_alphabet() -> dict[int, str]:
    """GPT-2's byte -> printable character table (the spelling of byte-level BPE vocabularies)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b], extra = chr(256 + extra), extra + 1
    return table


def gguf_tokenizer(fields: dict[str, Any]):
    """The file's tokenizer as a `tokenizers.Tokenizer`: byte-level BPE ("gpt2": SmolLM2, Llama 3), its control
    tokens special (kept whole, skipped when decoding), its user-defined tokens whole."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    kind = fields.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ConfigError(N_("tokenizer.ggml.model={kind!r}: only byte-level BPE ('gpt2') tokenizers are rebuilt"),
                          kind=kind)
    tokens, merges = fields.get("tokenizer.ggml.tokens"), fields.get("tokenizer.ggml.merges") or []
    types = fields.get("tokenizer.ggml.token_type") or [1] * len(tokens or [])
    for key, value, kind in (("tokens", tokens, str), ("merges", merges, str), ("token_type", types, int)):
        if not isinstance(value, list) or not all(isinstance(v, kind) for v in value) or not (value or key != "tokens"):
            raise ConfigError(f"metadata tokenizer.ggml.{key} must be a list of {kind.__name__} values"
                              + (" (the vocabulary)" if key == "tokens" else ""))
    if any(len(m.split(" ")) != 2 for m in merges):
        raise ConfigError(N_("metadata tokenizer.ggml.merges: each merge is two tokens separated by one space"))
    spelling = _byte_alphabet()
    alphabet = set(spelling.values())
    vocab = {t if set(t) <= alphabet else "".join(spelling[b] for b in t.encode("utf-8")): i
             for i, t in enumerate(tokens)}
    try:
        tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges]))
    except Exception as e:  # the tokenizers library's own error (a merge of tokens not in the vocabulary): one line
        raise ConfigError(N_("the GGUF tokenizer metadata cannot be built: {splitlines}"),
                          splitlines=str(e).splitlines()[0][:200]) from None
    split = SPLITS.get(fields.get("tokenizer.ggml.pre"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False) if split is None else pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(split), behavior="isolated"), pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                                         use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, kind in zip(tokens, types) if kind == 3 and set(t) <= alphabet])  # 3: CONTROL
    tok.add_tokens([AddedToken(t, normalized=False) for t, kind in zip(tokens, types) if kind == 4])  # USER_DEFINED
    return tok

"""CTranslate2: a run written as a CTranslate2 model folder, through CTranslate2's public spec API. Decoding with
it is the ctranslate2 engine's (engines/ctranslate2.py); this file only writes files.

    export(run, out, quantization="float32" | "int8")      a CTranslate2 model folder (model.bin, vocabularies)
    convert_model(model, src_tokens, tgt_tokens, out)      the same from a bare EncoderDecoder and token tables
    cached_export(run)                                      the folder the engine decodes with, in RUN_DIR/export/

The mapping (ctranslate2.specs.TransformerSpec, filled by a `ctranslate2.converters.Converter` whose `_load`
returns it): our fused projections are CTranslate2's layout as they are. Self-attention linear[0] = W_qkv
(h*(2 d_k + d_v), D), linear[1] = W_o; cross-attention linear[0] = W_q, linear[1] = W_kv, linear[2] = W_o;
the sublayer norms are each attention's and the FFN's `layer_norm`; positions (interleaved or concatenated
sinusoids, or a learned table) are given as explicit (max_len, D) `position_encodings`; sources get </s> from
`add_source_eos`. Vocabularies are our tokenizers' id -> token tables, so the specials keep our ids
(<pad> 0, <s> 1, </s> 2, <unk> 3) and a token string maps back to exactly one id.

What the export does for decoding as ours does: sources get </s> from `add_source_eos`, and PAD is never emitted
(PAD's output bias is PAD_LOGIT: CT2 then drops it before the softmax, ours after, log(1 - P(PAD)) a step apart:
0 for a trained model). The budgets, CT2's ranking against GNMT's and patience are the engine's (its docstring).

The exported folder on its own: token strings in (tokenizer.json beside it, a plain `tokenizers` file, gives them
without </s>: CT2 adds it), and `max_decoding_length` at most the model's max_len (the position table ends there);
translate_options.json, decoding.json (the run's own) and README.md carry the run's decoding settings; the
README's translate() does the engine's search with them, and says what translate_batch cannot do.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from scratchformer.config.decoding import length_penalty_for
from scratchformer.data.tokenizers import BOS_ID, EOS_ID, UNK_ID, Tokenizer
from scratchformer.decoding.common import special_ids
from scratchformer.errors import N_, ConfigError
from scratchformer.export import formats
from scratchformer.export.formats import weights_digest
from scratchformer.model.feedforward import ACTIVATIONS
from scratchformer.model.transformer import EncoderDecoder
from scratchformer.runs import Run

FORMAT_VERSION = 4  # of what this converter writes: a cached export from another version is rebuilt (4: legacy merges)
STAMP = "scratchformer_export.json"  # in the exported folder: what it was made from
QUANTIZATIONS = ("float32", "int8")
PAD_LOGIT = -1e4  # exp(-1e4 - max) is 0 in float32: PAD out of every softmax (and finite in float16)
Scored = tuple[list[str], float]  # a finished hypothesis: its tokens (with </s> where it ended), summed log-prob


# -- what CTranslate2's Transformer can express ----------------------------------------------------------------

def check_model(model: EncoderDecoder) -> None:
    """A one-line ConfigError naming the config field a CTranslate2 TransformerSpec cannot express."""
    c = model.config
    if c.arch != "encoder-decoder":
        raise ConfigError(N_("arch={arch!r}: the CTranslate2 export writes encoder-decoder (translation) models only"),
                          arch=c.arch)
    if c.norm_placement not in ("post", "pre") or c.norm_kind != "layer":
        raise ConfigError(N_("norm_placement={norm_placement!r}, norm_kind={norm_kind!r}: CTranslate2's Transformer "
                             "has post or pre LayerNorm only"), norm_placement=c.norm_placement, norm_kind=c.norm_kind)
    if c.norm_placement == "post" and c.use_final_norm:
        raise ConfigError(N_("final_norm=True with norm_placement='post': CTranslate2 has a final LayerNorm only "
                             "for pre-norm stacks"))
    if c.ffn_kind != "mlp" or c.positions == "rope" or c.kv_heads != c.n_heads:
        raise ConfigError(N_("ffn_kind={ffn_kind!r}, positions={positions!r}, n_kv_heads={n_kv_heads}: the "
                             "CTranslate2 export writes the paper's FFN, positions added at the input and full "
                             "heads only"), ffn_kind=c.ffn_kind, positions=c.positions, n_kv_heads=c.n_kv_heads)
    if c.head_dim_k != c.head_dim_v:
        raise ConfigError(N_("d_v={head_dim_v} differs from d_k={head_dim_k}: CTranslate2 has one head width"),
                          head_dim_v=c.head_dim_v, head_dim_k=c.head_dim_k)
    if c.type_vocab_size:
        raise ConfigError(N_("type_vocab_size={type_vocab_size}: CTranslate2's Transformer has no token types"),
                          type_vocab_size=c.type_vocab_size)


def _token_table(tok: Tokenizer, side: str) -> list[str]:
    """The id -> token table of `tok`; one-line ConfigError if two ids share a string (CT2 speaks strings)."""
    tokens = [tok.id_to_token(i) for i in range(tok.vocab_size)]
    if len(set(tokens)) != len(tokens):
        dup = next(t for i, t in enumerate(tokens) if t in tokens[:i])
        raise ConfigError(N_("the {side} tokenizer holds the token {dup!r} twice: CTranslate2 looks tokens up by "
                             "string, so every id needs its own"), side=side, dup=dup)
    return tokens


def check_expressible(run: Run) -> None:
    """Before anything is written: the architecture, and vocabularies CTranslate2 can address by string."""
    check_model(run.model)
    _token_table(run.src_tok, "source")
    _token_table(run.tgt_tok, "target")
    _specials(run.model, _token_table(run.src_tok, "source"), _token_table(run.tgt_tok, "target"))


def _specials(model: EncoderDecoder, src_tokens: list[str], tgt_tokens: list[str]) -> dict[str, str]:
    """The spec config's special tokens: start and end as the model decodes (decoding/common.special_ids)."""
    bos, eos, _ = special_ids(model, None, None, None)
    if src_tokens[EOS_ID] != tgt_tokens[eos]:  # add_source_eos appends the target side's end token string
        raise ConfigError(N_("the source tokenizer's end token {src_tokens!r} (id {EOS_ID}) differs from the "
                             "target's {tgt_tokens!r} (extra.eos_token_id={eos}): CTranslate2 adds one to sources"),
                          src_tokens=src_tokens[EOS_ID], EOS_ID=EOS_ID, tgt_tokens=tgt_tokens[eos], eos=eos)
    return {"decoder_start_token": tgt_tokens[bos], "eos_token": tgt_tokens[eos], "bos_token": tgt_tokens[BOS_ID],
            "unk_token": tgt_tokens[UNK_ID]}


# -- the spec ---------------------------------------------------------------------------------------------------

def _np(t: torch.Tensor):
    return t.detach().to("cpu", torch.float32).contiguous().numpy()  # inference_layout's column-major -> rows


def _linear(spec, linear: torch.nn.Linear) -> None:
    spec.weight = _np(linear.weight)  # (out, in)
    if linear.bias is not None:
        spec.bias = _np(linear.bias)


def _norm(spec, norm) -> None:
    spec.gamma, spec.beta = _np(norm.weight), _np(norm.bias)


def _input(spec, embed, scale: bool) -> None:
    """Token table, sqrt(D) scaling and explicit (max_len, D) positions: CT2 adds them as we do."""
    emb = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    emb.weight = _np(embed.token.weight)  # (V, D)
    spec.scale_embeddings = scale
    position = embed.position
    spec.position_encodings.encodings = _np(position.table if hasattr(position, "table") else position.weight)
    if embed.norm is not None:
        _norm(spec.layernorm_embedding, embed.norm)


def _attention(spec, attn, cross: bool) -> None:
    if cross:  # linear[0] = Q, linear[1] = KV, linear[2] = out
        _linear(spec.linear[0], attn.w_q)
        _linear(spec.linear[1], attn.w_kv)
    else:  # linear[0] = QKV, linear[1] = out
        _linear(spec.linear[0], attn.w_qkv)
    _linear(spec.linear[-1], attn.w_o)


def _layer(spec, layer) -> None:
    _attention(spec.self_attention, layer.self_attn, cross=False)
    _norm(spec.self_attention.layer_norm, layer.sublayer[0].norm)
    if getattr(layer, "cross_attn", None) is not None:
        _attention(spec.attention, layer.cross_attn, cross=True)
        _norm(spec.attention.layer_norm, layer.sublayer[1].norm)
    _linear(spec.ffn.linear_0, layer.feed_forward.w_1)
    _linear(spec.ffn.linear_1, layer.feed_forward.w_2)
    _norm(spec.ffn.layer_norm, layer.sublayer[-1].norm)


def _never_pad(spec, pad: int, vocab: int) -> None:
    """PAD's output bias at PAD_LOGIT: CT2 never emits it, as our searches never do (no per-step processor)."""
    import numpy as np

    bias = np.array(spec.bias, dtype=np.float32) if spec.has_bias() else np.zeros(vocab, dtype=np.float32)  # a copy
    bias[pad] = PAD_LOGIT
    spec.bias = bias


def build_spec(model: EncoderDecoder, src_tokens: list[str], tgt_tokens: list[str]):
    """A filled ctranslate2.specs.TransformerSpec of `model` (weights copied as float32 numpy arrays)."""
    from ctranslate2.specs import common_spec, transformer_spec

    check_model(model)
    c = model.config
    pre = c.norm_placement == "pre"
    shape: dict[str, Any] = dict(pre_norm=pre, no_final_norm=pre and not c.use_final_norm,
                                 activation=getattr(common_spec.Activation, ACTIVATIONS[c.activation].ct2),
                                 layernorm_embedding=c.embedding_norm)
    if c.n_heads * c.head_dim_k != c.d_model:
        shape["head_dim"] = c.head_dim_k
    spec = transformer_spec.TransformerSpec(
        transformer_spec.TransformerEncoderSpec(c.n_encoder_layers, c.n_heads, **shape),
        transformer_spec.TransformerDecoderSpec(c.n_decoder_layers, c.n_heads, **shape))
    for side, stack, embed in ((spec.encoder, model.encoder, model.src_embed),
                               (spec.decoder, model.decoder, model.tgt_embed)):
        _input(side, embed, c.scale_embeddings)
        for layer_spec, layer in zip(side.layer, stack.layers):
            _layer(layer_spec, layer)
        if stack.norm is not None:
            _norm(side.layer_norm, stack.norm)
    _linear(spec.decoder.projection, model.generator.proj)  # (V, D); tied: the embedding's values again
    _never_pad(spec.decoder.projection, special_ids(model, None, None, None)[2], c.tgt_vocab_size)
    spec.config.layer_norm_epsilon = c.layer_norm_eps
    spec.config.add_source_eos = True
    for key, token in _specials(model, src_tokens, tgt_tokens).items():
        setattr(spec.config, key, token)
    spec.register_source_vocabulary(src_tokens)
    spec.register_target_vocabulary(tgt_tokens)
    return spec


def convert_model(model: EncoderDecoder, src_tokens: list[str], tgt_tokens: list[str], out: str | Path,
                  quantization: str | None = None) -> Path:
    """Write `model` as a CTranslate2 folder at `out` (replaced if it exists), through a Converter subclass."""
    from ctranslate2.converters import Converter

    if (quantization or "float32") not in QUANTIZATIONS:
        raise ConfigError(N_("--quantization {quantization}: choose one of {QUANTIZATIONS}"), quantization=quantization,
                          QUANTIZATIONS=', '.join(QUANTIZATIONS))

    class SpecConverter(Converter):
        def _load(self):
            return build_spec(model, src_tokens, tgt_tokens)

    return Path(SpecConverter().convert(str(out), quantization=quantization or "float32", force=True))


def translate_options(run: Run) -> dict[str, Any]:
    """translate_options.json: the run's decoding as translate_batch keywords: its beam, the run's alpha as CT2's
    |Y|^length_penalty of the same slope at |Y| = 25 (config/decoding.py: length_penalty_for), patience 3 (the
    ctranslate2 engine's: its README's translate() asks for beam x patience finished hypotheses and ranks them by
    GNMT), the model's max_len, EOS allowed at step 0 as in ours. models/en-zh (alpha 1.5), 100 test sentences, beam
    4, identical to ours: 98 through the README's translate() (97 at patience 2), 93 from translate_batch with these
    options alone (92 at patience 2); greedy: 100 (hf_card.PARITY)."""
    return {"beam_size": run.decoding.beam, "length_penalty": length_penalty_for(run.decoding.alpha), "patience": 3,
            "max_decoding_length": run.model_config.max_positions, "min_decoding_length": 0}


def export(run: Run, out: Path, quantization: str | None = None, **options: Any) -> Path:
    """The run as a CTranslate2 folder in the (empty) folder `out`, with standard tokenizer files (tokenizer.json,
    target_tokenizer/: no specials added, CT2 appends </s>), translate_options.json, a README.md and a stamp."""
    from scratchformer.export import hf_card, onnx

    convert_model(run.model, _token_table(run.src_tok, "source"), _token_table(run.tgt_tok, "target"), out,
                  quantization)
    dirs = onnx.tokenizer_files(run, Path(out), template="$A")
    onnx.write_json(Path(out) / "translate_options.json", translate_options(run))
    hf_card.write_decoding(run, Path(out))
    (Path(out) / "README.md").write_text(hf_card.client_readme(run, "ctranslate2", dirs, translate_options(run)),
                                         encoding="utf-8")
    made = options.get("stamp") or stamp(run, quantization)
    (Path(out) / STAMP).write_text(json.dumps(made, indent=1) + "\n", encoding="utf-8")
    return Path(out)


# -- the cache in the run directory ---------------------------------------------------------------------------

def stamp(run: Run, quantization: str | None = None) -> dict[str, Any]:
    """What an export is made from: this converter's version, CTranslate2's, the weights and the tokenizers."""
    import ctranslate2

    tokenizers = json.dumps([run.src_tok.to_dict(), run.tgt_tok.to_dict()], sort_keys=True).encode()
    return {"format": "ctranslate2", "format_version": FORMAT_VERSION, "ctranslate2": ctranslate2.__version__,
            "quantization": quantization or "float32", "weights_sha256": weights_digest(run.model),
            "tokenizers_sha256": hashlib.sha256(tokenizers).hexdigest()}


def cached_export(run: Run) -> Path:
    """RUN_DIR/export/ctranslate2/, written on first use and again whenever its stamp no longer matches (other
    weights, tokenizers, converter or CTranslate2 version); export/formats.py keeps the cache."""
    want = stamp(run)
    return formats.cached_export(run, "ctranslate2", want, lambda folder: export(run, folder, stamp=want), STAMP)

"""Marian / OPUS-MT (model_type "marian") <-> our encoder-decoder: post-norm, silu, shared embeddings scaled by
sqrt(D), final_logits_bias. Marian's sinusoid table (first half sin, second half cos) equals our
"sinusoidal-concat" to the last bit (tested), so it is computed, not read. Marian starts decoding from pad_id:
`config.decoder_start_id` (and `config.extra["decoder_start_token_id"]`) record it.

The paper's interleaved sinusoids (sin, cos, sin, cos, ...) are the concatenated ones ([sin ... | cos ...]) with
the D dimensions permuted: concat[:, k] = interleaved[:, P[k]], P = [0, 2, 4, ..., 1, 3, 5, ...].
`interleaved_to_concat` folds P into the weights: every tensor that writes the residual stream (embeddings,
output projections, FFN outputs, LayerNorms) has its D axis reordered by P, and every one that reads it (Q/K/V,
FFN inputs, the generator) has its input columns reordered the same way. LayerNorm's mean and variance do not
depend on the order, attention and the FFN only see the stream through those maps, so the model with
concatenated sinusoids computes exactly the same function (up to float summation order; tested).
"""

from __future__ import annotations

import torch
from torch import Tensor

from scratchformer.config import ModelConfig
from scratchformer.errors import N_, ConfigError
from scratchformer.interop.hf_base import ACT_OUT, Family, Link, activation, classic_problems, pair

# Our parameter names by how they touch the residual stream (D): matched on the name's last two parts.
_READS = ("token.weight", "w_qkv.weight", "w_q.weight", "w_kv.weight", "w_1.weight", "proj.weight")  # (out, D)
_WRITES = ("w_o.weight", "w_o.bias", "w_2.weight", "w_2.bias", "norm.weight", "norm.bias")  # (D, ...) or (D,)
_INSIDE = ("w_qkv.bias", "w_q.bias", "w_kv.bias", "w_1.bias", "proj.bias")  # head or FFN or vocabulary axes only


class Marian(Family):
    """Marian: config fields, tensor names, where the shared embedding lives, and export checks."""

    model_type, arch, prefixes = "marian", "encoder-decoder", ("model.",)
    export_archs = {"MarianMTModel": "model."}

    def config(self, hf, need):
        for a, b in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
            if need(a) != need(b):
                raise ConfigError(N_("{a}={hf} differs from {b}={hf2} (our config has one value for both)"), a=a,
                                  hf=hf[a], b=b, hf2=hf[b])
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
                    activation_dropout=hf.get("activation_dropout", 0.0), norm_placement="post", final_norm=False,
                    positions="sinusoidal-concat", activation=activation(hf.get("activation_function", "gelu")),
                    tie_embeddings=tie, scale_embeddings=hf.get("scale_embedding", False),
                    max_positions=need("max_position_embeddings"), pad_id=pad, layer_norm_eps=1e-5, generator_bias=True,
                    decoder_start_id=hf.get("decoder_start_token_id", pad))

    def links(self, c):
        links = [Link("src_embed.token.weight", ("encoder.embed_tokens.weight",)),
                 Link("tgt_embed.token.weight", ("decoder.embed_tokens.weight",)),
                 Link("generator.proj.bias", ("final_logits_bias",), "row", optional=True)]
        if c.tie_embeddings and c.shared_vocab:  # one matrix, stored once as `shared`
            links = [Link("tgt_embed.token.weight", ("shared.weight",)), links[2]]
        if not c.tie_embeddings:
            links.append(Link("generator.proj.weight", ("lm_head.weight",)))
        for i in range(c.n_encoder_layers):
            o = t = f"encoder.layers.{i}."
            links += [*pair(o + "self_attn.w_qkv", tuple(f"{t}self_attn.{n}_proj" for n in "qkv")),
                      *pair(o + "self_attn.w_o", t + "self_attn.out_proj"),
                      *pair(o + "sublayer.0.norm", t + "self_attn_layer_norm"),
                      *pair(o + "feed_forward.w_1", t + "fc1"), *pair(o + "feed_forward.w_2", t + "fc2"),
                      *pair(o + "sublayer.1.norm", t + "final_layer_norm")]
        for i in range(c.n_decoder_layers):
            o = t = f"decoder.layers.{i}."
            links += [*pair(o + "self_attn.w_qkv", tuple(f"{t}self_attn.{n}_proj" for n in "qkv")),
                      *pair(o + "self_attn.w_o", t + "self_attn.out_proj"),
                      *pair(o + "sublayer.0.norm", t + "self_attn_layer_norm"),
                      *pair(o + "cross_attn.w_q", t + "encoder_attn.q_proj"),
                      *pair(o + "cross_attn.w_kv", (t + "encoder_attn.k_proj", t + "encoder_attn.v_proj")),
                      *pair(o + "cross_attn.w_o", t + "encoder_attn.out_proj"),
                      *pair(o + "sublayer.1.norm", t + "encoder_attn_layer_norm"),
                      *pair(o + "feed_forward.w_1", t + "fc1"), *pair(o + "feed_forward.w_2", t + "fc2"),
                      *pair(o + "sublayer.2.norm", t + "final_layer_norm")]
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
        return classic_problems(c, self.model_type) + [p for cond, p in (
            (c.norm_placement == "post", f"norm_placement={c.norm_placement!r} (Marian is post-norm)"),
            (not c.use_final_norm, "final_norm is on (Marian has no final LayerNorm)"),
            (c.positions == "sinusoidal-concat", f"positions={c.positions!r} (Marian: 'sinusoidal-concat'"
                                                 + ("; interleaved_to_concat folds the difference into the weights, "
                                                    "as `scratchformer export --format hf` does)"
                                                    if c.positions == "sinusoidal" else ")")),
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
                    decoder_ffn_dim=c.d_ff, activation_function=ACT_OUT[c.activation], dropout=c.dropout,
                    attention_dropout=c.attention_dropout, activation_dropout=c.activation_dropout,
                    max_position_embeddings=c.max_positions, scale_embedding=c.scale_embeddings,
                    share_encoder_decoder_embeddings=shared, tie_word_embeddings=c.tie_embeddings,
                    pad_token_id=c.pad_id, decoder_start_token_id=_start_id(c), is_encoder_decoder=True,
                    forced_eos_token_id=c.extra.get("forced_eos_token_id"))


def concat_permutation(d_model: int) -> Tensor:
    """P with concat_table[:, k] == interleaved_table[:, P[k]]: the even dimensions (sin), then the odd (cos)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def interleaved_to_concat(state: dict[str, Tensor], d_model: int) -> dict[str, Tensor]:
    """The state dict of an encoder-decoder with interleaved sinusoids -> the same function with concatenated ones.

    The residual stream x (..., D) becomes x[..., P]: writers are reordered on their D axis (rows), readers on
    their input columns; a parameter of any other name is refused (one line), so no tensor is missed silently.
    """
    perm = concat_permutation(d_model)
    out: dict[str, Tensor] = {}
    for name, t in state.items():
        kind = ".".join(name.split(".")[-2:])
        if kind in _READS:
            out[name] = t[:, perm]  # (out, D): input columns follow the stream
        elif kind in _WRITES:
            out[name] = t[perm]  # (D, in) or (D,): output rows follow the stream
        elif kind in _INSIDE:
            out[name] = t
        else:
            raise ConfigError(N_("cannot fold the sinusoid permutation into parameter {name!r}: unknown to "
                                 "hf_marian.interleaved_to_concat"), name=name)
    return out


def _start_id(c: ModelConfig) -> int | None:
    """The id the decoder starts from: the config field, else what config_from_hf put in `extra`."""
    return c.decoder_start_id if c.decoder_start_id is not None else c.extra.get("decoder_start_token_id")


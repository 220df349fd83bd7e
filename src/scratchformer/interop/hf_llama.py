"""Llama (model_type "llama": Llama 2/3, SmolLM2, TinyLlama, ...) <-> our decoder with Llama's boxes: RMSNorm before
each sublayer and at the end, RoPE inside attention, grouped-query attention, a SwiGLU FFN, no biases.

    ours                                  LlamaForCausalLM (names under "model.")
    embed.token.weight                    embed_tokens.weight
    decoder.layers.i.sublayer.0.norm      layers.i.input_layernorm            (RMSNorm: a weight, no bias)
    decoder.layers.i.self_attn.w_qkv      layers.i.self_attn.{q,k,v}_proj     stacked [q; k; v], h + 2 h_kv heads
    decoder.layers.i.self_attn.w_o        layers.i.self_attn.o_proj
    decoder.layers.i.sublayer.1.norm      layers.i.post_attention_layernorm
    decoder.layers.i.feed_forward.w_1     layers.i.mlp.{gate,up}_proj         stacked [gate; up]
    decoder.layers.i.feed_forward.w_2     layers.i.mlp.down_proj
    decoder.norm                          norm
    generator.proj.weight                 lm_head.weight                      (absent when tie_word_embeddings)

Both rope layouts agree: Hugging Face's q_proj / k_proj rows are already in the half-split order model/rope.py uses
(GGUF files store them permuted for llama.cpp's interleaved pairs: interop/gguf.py undoes that).
"""

from __future__ import annotations

from typing import Any

from scratchformer.errors import N_, ConfigError
from scratchformer.interop.hf_base import ACT_OUT, Family, Link, activation, pair


def rope_fields(hf: dict[str, Any]) -> dict[str, Any]:
    """rope_theta and rope_scaling from a config.json: transformers 5 writes `rope_parameters` (theta inside),
    4.x `rope_theta` and `rope_scaling` at the top level."""
    params = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
    theta = params.pop("rope_theta", hf.get("rope_theta", 10000.0))
    if "type" in params and "rope_type" not in params:  # the oldest spelling
        params["rope_type"] = params.pop("type")
    scaling = params if params.get("rope_type", "default") != "default" else None
    return dict(rope_theta=float(theta), rope_scaling=scaling)


class Llama(Family):
    """Llama: config fields, tensor names and what an export cannot express."""

    model_type, arch, prefixes = "llama", "decoder", ("model.",)
    export_archs = {"LlamaForCausalLM": "model."}

    def config(self, hf, need):
        vocab, d, h = need("vocab_size"), need("hidden_size"), need("num_attention_heads")
        if bool(hf.get("attention_bias", False)) != bool(hf.get("mlp_bias", False)):
            raise ConfigError(N_("attention_bias and mlp_bias differ: our `bias` covers attention and FFN together"))
        head_dim = hf.get("head_dim") or d // h
        pad = next((hf[k] for k in ("pad_token_id", "eos_token_id")
                    if isinstance(hf.get(k), int) and 0 <= hf[k] < vocab), 0)
        return dict(arch="decoder", src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d, n_heads=h,
                    n_kv_heads=hf.get("num_key_value_heads") or h, d_k=head_dim, d_v=head_dim,
                    d_ff=need("intermediate_size"), n_decoder_layers=need("num_hidden_layers"),
                    dropout=0.0, attention_dropout=hf.get("attention_dropout", 0.0), norm_placement="pre",
                    norm_kind="rms", final_norm=True, positions="rope", **rope_fields(hf), ffn_kind="gated",
                    activation=activation(hf.get("hidden_act", "silu")),
                    tie_embeddings=hf.get("tie_word_embeddings", False), scale_embeddings=False,
                    max_positions=need("max_position_embeddings"), pad_id=pad,
                    layer_norm_eps=hf.get("rms_norm_eps", 1e-6),
                    bias=bool(hf.get("attention_bias", False)), generator_bias=False)

    def links(self, c):
        hk, kv = c.n_heads * c.head_dim_k, c.kv_heads * c.head_dim_k
        links = [Link("embed.token.weight", ("embed_tokens.weight",))]
        for i in range(c.n_decoder_layers):
            o, t = f"decoder.layers.{i}.", f"layers.{i}."
            qkv = tuple(f"{t}self_attn.{n}_proj" for n in "qkv")
            links += [*pair(o + "sublayer.0.norm", t + "input_layernorm", bias=False),
                      *pair(o + "self_attn.w_qkv", qkv, bias=c.bias, rows=(hk, kv, kv)),
                      *pair(o + "self_attn.w_o", t + "self_attn.o_proj", bias=c.bias),
                      *pair(o + "sublayer.1.norm", t + "post_attention_layernorm", bias=False),
                      *pair(o + "feed_forward.w_1", (t + "mlp.gate_proj", t + "mlp.up_proj"), bias=c.bias),
                      *pair(o + "feed_forward.w_2", t + "mlp.down_proj", bias=c.bias)]
        links += pair("decoder.norm", "norm", bias=False)
        if not c.tie_embeddings:
            links.append(Link("generator.proj.weight", ("lm_head.weight",)))
        return links

    def problems(self, c):
        return [p for ok, p in (
            (c.norm_placement == "pre" and c.use_final_norm, "norm_placement='pre' with a final norm (Llama's)"),
            (c.norm_kind == "rms", f"norm_kind={c.norm_kind!r} (Llama uses RMSNorm)"),
            (c.positions == "rope", f"positions={c.positions!r} (Llama uses rope)"),
            (c.ffn_kind == "gated", f"ffn_kind={c.ffn_kind!r} (Llama's FFN is gated)"),
            (c.activation in ACT_OUT, f"activation={c.activation!r}"),
            (c.head_dim_k == c.head_dim_v, "d_k != d_v (Llama has one head_dim)"),
            (not c.scale_embeddings, "scale_embeddings=True (Llama does not scale embeddings)"),
            (not c.embedding_norm and c.type_vocab_size == 0, "embedding_norm / type_vocab_size (Llama has neither)"),
            (not c.generator_bias, "generator_bias=True (Llama's lm_head has no bias)"),
        ) if not ok]

    def hf_config(self, c):
        rope = {"rope_type": "default", **(c.rope_scaling or {}), "rope_theta": c.rope_theta}
        act = "silu" if c.activation == "silu" else ACT_OUT[c.activation]
        return dict(vocab_size=c.tgt_vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff,
                    num_hidden_layers=c.n_decoder_layers, num_attention_heads=c.n_heads,
                    num_key_value_heads=c.kv_heads, head_dim=c.head_dim_k, hidden_act=act,
                    max_position_embeddings=c.max_positions, rms_norm_eps=c.layer_norm_eps, rope_parameters=rope,
                    rope_theta=c.rope_theta, rope_scaling=c.rope_scaling, attention_bias=c.bias, mlp_bias=c.bias,
                    attention_dropout=c.attention_dropout, tie_word_embeddings=c.tie_embeddings,
                    pad_token_id=c.extra.get("pad_token_id"))

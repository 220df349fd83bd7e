"""GPT-2 (model_type "gpt2") <-> our decoder: pre-norm with a final ln_f, learned positions, a tied lm_head
without bias. Its Conv1D stores weights (in, out), the transpose of nn.Linear, and `c_attn` already stacks
[q | k | v] along the output axis.
"""

from __future__ import annotations

from scratchformer.errors import N_, ConfigError
from scratchformer.interop.hf_base import ACT_OUT, Family, Link, activation, classic_problems, pair


class Gpt2(Family):
    """GPT-2: config fields, tensor names (Conv1D layout) and what an export cannot express."""

    model_type, arch, prefixes = "gpt2", "decoder", ("transformer.",)
    export_archs = {"GPT2LMHeadModel": "transformer.", "GPT2Model": ""}

    def config(self, hf, need):
        if not hf.get("scale_attn_weights", True) or hf.get("scale_attn_by_inverse_layer_idx", False):
            raise ConfigError(N_("scale_attn_weights=false or scale_attn_by_inverse_layer_idx=true is not supported "
                                 "(our attention always scales by 1/sqrt(d_k))"))
        if hf.get("add_cross_attention"):
            raise ConfigError(N_("add_cross_attention=true GPT-2 variants are not supported"))
        vocab, d = need("vocab_size"), need("n_embd")
        pad = next((hf[k] for k in ("pad_token_id", "eos_token_id")  # GPT-2 has no pad: pad with EOS, as HF does
                    if isinstance(hf.get(k), int) and 0 <= hf[k] < vocab), 0)
        return dict(arch="decoder", src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d, n_heads=need("n_head"),
                    d_ff=hf.get("n_inner") or 4 * d, n_decoder_layers=need("n_layer"),
                    dropout=hf.get("resid_pdrop", 0.1), attention_dropout=hf.get("attn_pdrop", 0.1),
                    norm_placement="pre", final_norm=True, positions="learned",
                    activation=activation(hf.get("activation_function", "gelu_new")),
                    tie_embeddings=hf.get("tie_word_embeddings", True), scale_embeddings=False,
                    max_positions=need("n_positions"), pad_id=pad, layer_norm_eps=hf.get("layer_norm_epsilon", 1e-5),
                    generator_bias=False)

    def links(self, c):
        links = [Link("embed.token.weight", ("wte.weight",)), Link("embed.position.weight", ("wpe.weight",))]
        for i in range(c.n_decoder_layers):
            o, t = f"decoder.layers.{i}.", f"h.{i}."
            links += [*pair(o + "sublayer.0.norm", t + "ln_1"),
                      *pair(o + "self_attn.w_qkv", t + "attn.c_attn", "conv1d"),
                      *pair(o + "self_attn.w_o", t + "attn.c_proj", "conv1d"),
                      *pair(o + "sublayer.1.norm", t + "ln_2"),
                      *pair(o + "feed_forward.w_1", t + "mlp.c_fc", "conv1d"),
                      *pair(o + "feed_forward.w_2", t + "mlp.c_proj", "conv1d")]
        links += pair("decoder.norm", "ln_f")
        if not c.tie_embeddings:
            links.append(Link("generator.proj.weight", ("lm_head.weight",)))
        return links

    def problems(self, c):
        return classic_problems(c, self.model_type) + [p for cond, p in (
            (c.norm_placement == "pre", f"norm_placement={c.norm_placement!r} (GPT-2 is pre-norm)"),
            (c.use_final_norm, "final_norm is off (GPT-2 ends with ln_f)"),
            (c.positions == "learned", f"positions={c.positions!r} (GPT-2 learns its positions)"),
            (not c.scale_embeddings, "scale_embeddings=True (GPT-2 does not scale embeddings)"),
            (not c.embedding_norm and c.type_vocab_size == 0, "embedding_norm / type_vocab_size (GPT-2 has neither)"),
            (not c.generator_bias, "generator_bias=True (GPT-2's lm_head has no bias)"),
        ) if not cond]

    def hf_config(self, c):
        return dict(vocab_size=c.tgt_vocab_size, n_embd=c.d_model, n_layer=c.n_decoder_layers, n_head=c.n_heads,
                    n_inner=c.d_ff, n_positions=c.max_positions, activation_function=ACT_OUT[c.activation],
                    resid_pdrop=c.dropout, embd_pdrop=c.dropout, attn_pdrop=c.attention_dropout,
                    layer_norm_epsilon=c.layer_norm_eps, scale_attn_weights=True,
                    scale_attn_by_inverse_layer_idx=False, reorder_and_upcast_attn=False, add_cross_attention=False,
                    tie_word_embeddings=c.tie_embeddings, pad_token_id=c.pad_id)


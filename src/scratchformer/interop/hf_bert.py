"""BERT (model_type "bert") <-> our encoder: post-norm, learned positions, token types and an embedding
LayerNorm (eps 1e-12); W^Q, W^K, W^V are three Linear layers, stacked row-wise into our `w_qkv`.
"""

from __future__ import annotations

from scratchformer.errors import N_, ConfigError
from scratchformer.interop.hf_base import ACT_OUT, Family, Link, activation, classic_problems, pair


class Bert(Family):
    """BERT: config fields, tensor names, old LayerNorm spellings and what an export cannot express."""

    model_type, arch, prefixes = "bert", "encoder", ("bert.",)
    export_archs = {"BertModel": ""}

    def config(self, hf, need):
        if hf.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError(N_("position_embedding_type={position_embedding_type!r} (only 'absolute')"),
                              position_embedding_type=hf['position_embedding_type'])
        if hf.get("is_decoder") or hf.get("add_cross_attention"):
            raise ConfigError(N_("is_decoder / add_cross_attention BERT variants are not supported"))
        vocab = need("vocab_size")
        return dict(arch="encoder", src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=need("hidden_size"),
                    n_heads=need("num_attention_heads"), d_ff=need("intermediate_size"),
                    n_encoder_layers=need("num_hidden_layers"), dropout=hf.get("hidden_dropout_prob", 0.1),
                    attention_dropout=hf.get("attention_probs_dropout_prob", 0.1), norm_placement="post",
                    final_norm=False,
                    positions="learned", activation=activation(hf.get("hidden_act", "gelu")),
                    scale_embeddings=False, max_positions=need("max_position_embeddings"),
                    pad_id=hf.get("pad_token_id") or 0, layer_norm_eps=hf.get("layer_norm_eps", 1e-12),
                    type_vocab_size=hf.get("type_vocab_size", 2), embedding_norm=True)

    def links(self, c):
        links = [Link("embed.token.weight", ("embeddings.word_embeddings.weight",)),
                 Link("embed.position.weight", ("embeddings.position_embeddings.weight",)),
                 *pair("embed.norm", "embeddings.LayerNorm")]
        if c.type_vocab_size > 0:
            links.append(Link("embed.token_type.weight", ("embeddings.token_type_embeddings.weight",)))
        for i in range(c.n_encoder_layers):
            o, t = f"encoder.layers.{i}.", f"encoder.layer.{i}."
            qkv = tuple(f"{t}attention.self.{n}" for n in ("query", "key", "value"))
            links += [*pair(o + "self_attn.w_qkv", qkv), *pair(o + "self_attn.w_o", t + "attention.output.dense"),
                      *pair(o + "sublayer.0.norm", t + "attention.output.LayerNorm"),
                      *pair(o + "feed_forward.w_1", t + "intermediate.dense"),
                      *pair(o + "feed_forward.w_2", t + "output.dense"),
                      *pair(o + "sublayer.1.norm", t + "output.LayerNorm")]
        return links

    def normalise(self, state, hf):
        # Checkpoints from the TensorFlow era name LayerNorm parameters gamma / beta.
        def rename(k: str) -> str:
            if k.endswith("LayerNorm.gamma"):
                return k[: -len("gamma")] + "weight"
            return k[: -len("beta")] + "bias" if k.endswith("LayerNorm.beta") else k

        return {rename(k): v for k, v in state.items()}

    def problems(self, c):
        return classic_problems(c, self.model_type) + [p for cond, p in (
            (c.norm_placement == "post", f"norm_placement={c.norm_placement!r} (BERT is post-norm)"),
            (not c.use_final_norm, "final_norm is on (BERT has no final LayerNorm)"),
            (c.positions == "learned", f"positions={c.positions!r} (BERT learns its positions)"),
            (not c.scale_embeddings, "scale_embeddings=True (BERT does not scale embeddings)"),
            (c.embedding_norm, "embedding_norm=False (BERT always normalises its embeddings)"),
        ) if not cond]

    def hf_config(self, c):
        return dict(vocab_size=c.tgt_vocab_size, hidden_size=c.d_model, num_hidden_layers=c.n_encoder_layers,
                    num_attention_heads=c.n_heads, intermediate_size=c.d_ff, hidden_act=ACT_OUT[c.activation],
                    hidden_dropout_prob=c.dropout, attention_probs_dropout_prob=c.attention_dropout,
                    max_position_embeddings=c.max_positions, type_vocab_size=max(c.type_vocab_size, 1),
                    layer_norm_eps=c.layer_norm_eps, pad_token_id=c.pad_id, position_embedding_type="absolute",
                    is_decoder=False, add_cross_attention=False)


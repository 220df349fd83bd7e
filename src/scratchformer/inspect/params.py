"""Parameter table: exact counts per component of Figure 1, beside the seeds' closed-form estimate,
and the paper's Table 3 column beside ours (`table3`).

The seeds' estimate: each layer holds about 12 d^2 parameters (4 attention matrices of d^2, an FFN of
2 * d * 4d), so N layers hold 12 N d^2, plus V d for the embedding.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from scratchformer.config import PAPER_PARAMS_M, ModelConfig
from scratchformer.i18n import N_, _, pad
from scratchformer.model import build_model
from scratchformer.model.transformer import TransformerBase


@dataclass
class Row:
    component: str
    per_layer: int | None
    layers: int | None
    total: int
    note: str = ""


def _count(module: nn.Module | None, seen: set[int]) -> int:
    """Parameters of `module` not counted before (tied weights count once, where they first appear)."""
    if module is None:
        return 0
    n = 0
    for p in module.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            n += p.numel()
    return n


# the rows' names and notes as the table shows them (_() where shown): the rows keep English, which
# parameter_summary's JSON uses as keys
WORDS = (
    N_("input: source token embedding"), N_("input: source positions"), N_("input: source token types"),
    N_("input: source embedding layer norm"), N_("input: target token embedding"), N_("input: target positions"),
    N_("input: target token types"), N_("input: target embedding layer norm"), N_("input:  token embedding"),
    N_("input:  positions"), N_("input:  token types"), N_("input:  embedding layer norm"),
    N_("encoder: self-attention"), N_("encoder: cross-attention"), N_("encoder: feed-forward"),
    N_("encoder: layer norms (Add & Norm)"), N_("encoder: final layer norm"), N_("decoder: self-attention"),
    N_("decoder: cross-attention"), N_("decoder: feed-forward"), N_("decoder: layer norms (Add & Norm)"),
    N_("decoder: final layer norm"), N_("output: generator (linear + log-softmax)"), N_("shared with target"),
    N_("tied: counted above"), N_("rope: turns q and k, no parameters"), N_("sinusoidal: no parameters"),
    N_("weight tied to target embedding"), N_("weight tied to target embedding: bias only"),
)

def _stack_rows(stack: nn.Module, side: str, seen: set[int]) -> list[Row]:
    layers = list(stack.layers)
    first = layers[0]
    parts = [("self-attention", "self_attn"), ("cross-attention", "cross_attn"), ("feed-forward", "feed_forward")]
    rows = []
    for label, attr in parts:
        if getattr(first, attr, None) is None:
            continue
        per = sum(_count(getattr(layer, attr), seen) for layer in layers)
        rows.append(Row(f"{side}: {label}", per // len(layers), len(layers), per))
    per = sum(_count(layer.sublayer, seen) for layer in layers)
    rows.append(Row(f"{side}: layer norms (Add & Norm)", per // len(layers), len(layers), per))
    if stack.norm is not None:
        rows.append(Row(f"{side}: final layer norm", None, None, _count(stack.norm, seen)))
    return rows


def _embed_rows(embed: nn.Module, label: str, seen: set[int], note: str = "") -> list[Row]:
    rows = [Row(f"input: {label} token embedding", None, None, _count(embed.token, seen), note)]
    n_pos = _count(embed.position, seen)
    note = "" if n_pos else "rope: turns q and k, no parameters" if embed.position is None else \
        "sinusoidal: no parameters"
    rows.append(Row(f"input: {label} positions", None, None, n_pos, note))
    if embed.token_type is not None:
        rows.append(Row(f"input: {label} token types", None, None, _count(embed.token_type, seen)))
    if embed.norm is not None:
        rows.append(Row(f"input: {label} embedding layer norm", None, None, _count(embed.norm, seen)))
    return rows


def parameter_rows(model: TransformerBase) -> list[Row]:
    c, seen, rows = model.config, set(), []
    if c.arch == "encoder-decoder":
        shared = model.src_embed.token.weight is model.tgt_embed.token.weight
        rows += _embed_rows(model.src_embed, "source", seen, "shared with target" if shared else "")
        rows += _embed_rows(model.tgt_embed, "target", seen, "tied: counted above" if shared else "")
        rows += _stack_rows(model.encoder, "encoder", seen)
        rows += _stack_rows(model.decoder, "decoder", seen)
    else:
        rows += _embed_rows(model.embed, "", seen)
        rows += _stack_rows(model.encoder if c.arch == "encoder" else model.decoder,
                            "encoder" if c.arch == "encoder" else "decoder", seen)
    generator = getattr(model, "generator", None)
    if generator is not None:
        tied = c.tie_embeddings
        rows.append(Row("output: generator (linear + log-softmax)", None, None, _count(generator, seen),
                        ("weight tied to target embedding" + (": bias only" if c.generator_bias else ""))
                        if tied else ""))
    return rows


def seeds_estimate(config: ModelConfig) -> int:
    """12 * N * d^2 + V * d, the seeds' rule of thumb (N = all layers, V = vocabulary once if shared)."""
    n_layers = {"encoder-decoder": config.n_encoder_layers + config.n_decoder_layers,
                "encoder": config.n_encoder_layers, "decoder": config.n_decoder_layers}[config.arch]
    vocab = config.tgt_vocab_size if config.shared_vocab and config.tie_embeddings else (
        config.src_vocab_size + config.tgt_vocab_size if config.arch == "encoder-decoder" else config.tgt_vocab_size)
    return 12 * n_layers * config.d_model**2 + vocab * config.d_model


def closed_form(config: ModelConfig) -> int:
    """The weight matrices exactly (biases and norms left out): what the paper's column counts in essence."""
    d, h, dk, dv, dff = config.d_model, config.n_heads, config.head_dim_k, config.head_dim_v, config.d_ff
    kv = config.kv_heads  # GQA: h_kv heads of W^K and W^V
    attn = d * (h * dk + kv * (dk + dv)) + h * dv * d  # W^Q, W^K, W^V and W^O
    ffn = (3 if config.ffn_kind == "gated" else 2) * d * dff  # gated: W_gate, W_up, W_2
    n_enc = config.n_encoder_layers if config.arch != "decoder" else 0
    n_dec = config.n_decoder_layers if config.arch != "encoder" else 0
    cross = attn if config.arch == "encoder-decoder" else 0
    emb = config.tgt_vocab_size * d
    if config.arch == "encoder-decoder" and not (config.tie_embeddings and config.shared_vocab):
        emb += config.src_vocab_size * d
    if not config.tie_embeddings and config.arch != "encoder":
        emb += config.tgt_vocab_size * d
    return n_enc * (attn + ffn) + n_dec * (attn + cross + ffn) + emb


def format_table(rows: list[Row], config: ModelConfig, paper_m: float | None = None) -> str:
    """The table as text, headers in the language of `_()` (padded by display width: Chinese takes two columns)."""
    total = sum(r.total for r in rows)

    def line(name: str, per: str = "", n: str = "", count: str = "", note: str = "") -> str:
        return f"{pad(name, 44)} {pad(per, 12, True)} {pad(n, 6, True)} {pad(count, 14, True)}  {note}".rstrip()

    lines = [line(_("component"), _("per layer"), _("layers"), _("total"), _("note")), "-" * 92]
    for r in rows:
        per = f"{r.per_layer:,}" if r.per_layer is not None else ""
        n = str(r.layers) if r.layers is not None else ""
        lines.append(line(_(r.component), per, n, f"{r.total:,}", _(r.note) if r.note else ""))
    lines.append("-" * 92)
    lines.append(line(_("total (exact)"), count=f"{total:,}", note=f"= {total / 1e6:.2f}M"))
    lines.append(line(_("closed form: matrices only, no biases/norms"), count=f"{closed_form(config):,}"))
    lines.append(line(_("seeds estimate: 12*N*d^2 + V*d"), count=f"{seeds_estimate(config):,}"))
    if paper_m is not None:
        lines.append(line(_("paper, Table 3"), count=f"{paper_m:g}M"))
    return "\n".join(lines)


def parameter_summary(model: TransformerBase, paper_m: float | None = None) -> dict:
    rows = parameter_rows(model)
    return {
        "total": sum(r.total for r in rows),
        "closed_form": closed_form(model.config),
        "seeds_estimate": seeds_estimate(model.config),
        "paper_millions": paper_m,
        "components": {r.component: r.total for r in rows},
    }


def table3() -> list[dict]:
    """Every Table 3 row with a parameter count: ours, the paper's, and both differences from the base row."""
    base_ours = build_model(ModelConfig.preset("paper-base")).num_parameters()
    rows = []
    for name, paper in PAPER_PARAMS_M.items():
        config = ModelConfig.preset(name)
        ours = base_ours if name == "paper-base" else build_model(config).num_parameters()
        rows.append({"preset": name, "ours_M": round(ours / 1e6, 2), "paper_M": paper,
                     "ours_minus_base_M": round((ours - base_ours) / 1e6, 2),
                     "paper_minus_base_M": paper - PAPER_PARAMS_M["paper-base"],
                     "closed_form_M": round(closed_form(config) / 1e6, 2)})
    return rows

"""The run report: one self-contained HTML page of a translation run (images inline as base64 PNG, no network,
no script): config with the parameter and shape tables, training curves, positional encodings, attention of
every kind per layer and head for a few sentences, sample translations, test scores with signatures.

This file draws and lays out; the figures it is given (samples with chrF, test scores) are measured in
evaluation/report.py.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scratchformer.i18n import N_, _, language
from scratchformer.inspect.attention import KINDS, attention_maps, plot_kind
from scratchformer.inspect.fonts import EMBEDDED_FAMILY, font_face_css
from scratchformer.inspect.params import closed_form, parameter_rows, seeds_estimate
from scratchformer.inspect.plots import plot_curves, plot_positions
from scratchformer.inspect.shapes import shape_report
from scratchformer.runs.files import atomic_path
from scratchformer.runs.metrics import read_records
from scratchformer.runs.names import CURVE, METRICS_BASE

STYLE = """
body { font-family: "EMBEDDED", sans-serif; margin: 2em auto; max-width: 1200px; color: #222; line-height: 1.4; }
h1 { border-bottom: 2px solid #446; } h2 { margin-top: 2em; border-bottom: 1px solid #aab; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
td, th { border: 1px solid #ccd; padding: 2px 8px; text-align: left; } th { background: #eef; }
td.num { text-align: right; font-family: monospace; }
pre { background: #f6f6fa; padding: 0.6em; overflow-x: auto; font-size: 0.8em; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.3em 0; }
.note { color: #555; font-style: italic; } nav a { margin-right: 1em; }
.row { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
.row table { font-size: 0.8em; } .summary { background: #eef4ee; padding: 0.5em 1em; border-radius: 4px; }
""".replace("EMBEDDED", EMBEDDED_FAMILY)  # the subset has no ASCII: Latin comes from the browser's sans-serif

PAGE = """<!DOCTYPE html>
<html lang="{lang}"><head><meta charset="utf-8"><title>{title}</title>
<link rel="icon" href="data:,"><style>{font}{style}</style></head>
<body><h1>{title}</h1>
<nav>{nav}</nav>
{body}
</body></html>
"""

SECTIONS = (("scores", N_("Test scores")), ("samples", N_("Sample translations")),
            ("curves", N_("Training and validation curves")), ("attention", N_("Attention, per layer and head")),
            ("positions", N_("Positional encoding")), ("config", N_("Config, parameters and shapes")))


# the summary line's words for a model's norm placement and positions (the glossary's terms in Chinese)
NORMS = {"post": N_("post-norm"), "pre": N_("pre-norm")}
POSITIONS = {"sinusoidal": N_("sinusoidal"), "sinusoidal-concat": N_("sinusoidal-concat"), "learned": N_("learned"),
             "rope": N_("rope")}

def png_uri(path: str | Path) -> str:
    """A PNG file as a data: URI, to sit inside the page."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def image(path: str | Path, alt: str) -> str:
    return f'<img src="{png_uri(path)}" alt="{html.escape(alt)}">'


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An HTML table; numbers right-aligned (ints with thousands separators), everything escaped."""
    def cell(v: Any) -> str:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"<td>{html.escape('' if v is None else str(v))}</td>"
        return f'<td class="num">{v:,}</td>' if isinstance(v, int) else f'<td class="num">{v:.2f}</td>'

    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def config_section(run) -> str:
    """The model config, the training settings, the parameter table and the shape trace."""
    config = run.model_config
    rows = parameter_rows(run.model)
    total = sum(r.total for r in rows)
    params = [(_(r.component), r.per_layer, r.layers, r.total, _(r.note) if r.note else "") for r in rows]
    params += [(_("total (exact)"), None, None, total, f"{total / 1e6:.2f}M"),
               (_("closed form: matrices only"), None, None, closed_form(config), ""),
               (_("seeds' estimate 12 N d^2 + V d"), None, None, seeds_estimate(config), "")]
    fields = [(k, v) for k, v in dataclasses.asdict(config).items() if v not in ({}, None)]
    train = dataclasses.asdict(run.train_config) if run.train_config else {}
    head = [_("field"), _("value")]
    boxes = [(_("Model (config.json)"), table(head, [(k, str(v)) for k, v in fields]))]
    if train:
        boxes.append((_("Training (train_config.json)"),
                      table(head, [(k, str(v)) for k, v in train.items() if v is not None])))
    boxes.append((_("Parameters per component"), table(
        [_("component"), _("per layer"), _("layers"), _("total"), _("note")], params)))
    parts = ['<div class="row">' + "".join(f"<div><h3>{t}</h3>{b}</div>" for t, b in boxes) + "</div>",
             "<h3>" + _("Shapes (one batch of 2 random sentences, source length 10, target length 9)") + "</h3>",
              f"<pre>{html.escape(shape_report(run.model, batch=2, src_len=10, tgt_len=9))}</pre>"]
    return "\n".join(parts)


def attention_section(run, sentences: Sequence[tuple[str, str]], folder: Path) -> str:
    """For each (source, translation): a grid of layers x heads for each kind of attention."""
    parts = ['<p class="note">' + _("{n} sentence(s), teacher-forced with the model's own translation; rows are "
                                     "layers, columns heads; x: the keys attended to, y: the queries.").format(
        n=len(sentences)) + "</p>"]
    for i, (source, translation) in enumerate(sentences):
        maps = attention_maps(run, source, translation)
        parts.append(f"<h3>{html.escape(source)} &rarr; {html.escape(translation)}</h3>")
        for kind, english in KINDS.items():
            what = _(english)
            caption = _("{what}, sentence {n}").format(what=what, n=i + 1)
            path = plot_kind(maps, folder / f"attention-{i}-{kind}.png", kind, title=caption)
            parts.append(f"<h4>{html.escape(what)}</h4>" + image(path, caption))
    return "\n".join(parts)


def samples_section(samples: Sequence[dict]) -> str:
    rows = [(i + 1, s["src"], s["ref"], s["hyp"], s["chrf"]) for i, s in enumerate(samples)]
    return table(["#", _("source"), _("reference"), _("model (greedy)"), "chrF"], rows)


def scores_section(scores: dict) -> str:
    """scores: {"note": str, "rows": [{setting, sentences, bleu, chrf, bleu_signature, chrf_signature}]}."""
    rows = [(r["setting"], r.get("split", "test"), r.get("sentences"), r.get("bleu"), r.get("chrf"),
             r.get("bleu_signature"), r.get("chrf_signature")) for r in scores["rows"]]
    covers = _("Each row is scored on the split it names, over the number of sentences in its own column. A score "
               "on another slice (one source's sentences only, or other decoding options, as the README's headline "
               "is) is a different number and not comparable with these.")
    return (f'<p class="note">{html.escape(scores["note"])}</p><p class="note">{html.escape(covers)}</p>'
            + table([_("setting"), _("split"), _("sentences"), "BLEU", "chrF", _("BLEU signature"),
                     _("chrF signature")], rows))


def summary(run, samples: Sequence[dict], scores: dict) -> str:
    """One paragraph on top: the model's size and the best stored test score."""
    c = run.model_config
    best = max(scores["rows"], key=lambda r: r.get("bleu") or 0, default=None)
    chrf = f"{best['chrf']:.2f}" if best and isinstance(best.get("chrf"), (int, float)) else _("not stored")
    score = (_("{split} BLEU {bleu:.2f}, chrF {chrf} ({setting}, {sentences} sentences)").format(
        split=best.get("split", "test"), bleu=best["bleu"], chrf=chrf, setting=best["setting"],
        sentences=best["sentences"]) if best else _("no test scores"))
    norm = _(NORMS[c.norm_placement]) if c.norm_placement in NORMS else f"{c.norm_placement}-norm"
    text = _("{arch}, {params:.2f}M parameters: d_model={d_model}, {heads} heads, {enc}+{dec} layers, "
             "{norm}, {positions} positions; {score}; {samples} sample sentence(s).").format(
        arch=c.arch, params=run.model.num_parameters() / 1e6, d_model=c.d_model, heads=c.n_heads,
        enc=c.n_encoder_layers, dec=c.n_decoder_layers, norm=norm, positions=_(POSITIONS.get(c.positions, c.positions)),
        score=score, samples=len(samples))
    return f'<p class="summary">{html.escape(text)}</p>'


def render_report(run, records: Sequence[dict], samples: Sequence[dict], scores: dict, out: str | Path,
                  attention_samples: int = 3) -> Path:
    """Draw every figure and write the page to `out`. samples: [{src, ref, hyp, chrf}]; the first
    `attention_samples` of them get attention heatmaps. Returns the file written."""
    config = run.model_config
    with tempfile.TemporaryDirectory(prefix="scratchformer-report-") as tmp:
        folder = Path(tmp)
        earlier = earlier_phase(run.path)
        title = _("training of {run}").format(run=run.path.name)
        curves = (image(plot_curves(folder / CURVE, records, title=title, earlier=earlier), _("training curves"))
                  if records or earlier else '<p class="note">' + _("no metrics.jsonl in this run") + "</p>")
        pe_note = ("" if config.positions == "sinusoidal" else '<p class="note">' + _(
            "this model uses {positions} positions; the sinusoidal table of its width is shown for comparison"
        ).format(positions=config.positions) + "</p>")
        positions = pe_note + image(plot_positions(folder / "positions.png", config.d_model,
                                                   min(config.max_positions, 100)), _("sinusoidal positional encoding"))
        chosen = [(s["src"], s["hyp"]) for s in samples[:attention_samples] if s["src"].strip()]
        bodies = {"config": config_section(run), "curves": curves, "positions": positions,
                  "attention": attention_section(run, chosen, folder), "samples": samples_section(samples),
                  "scores": scores_section(scores)}
    body = summary(run, samples, scores) + "\n".join(f'<h2 id="{key}">{html.escape(_(title))}</h2>\n{bodies[key]}'
                                                      for key, title in SECTIONS)
    nav = "".join(f'<a href="#{key}">{html.escape(_(title))}</a>' for key, title in SECTIONS)
    title = _("scratchformer report: {run}").format(run=run.path.name)
    out = Path(out)
    page = PAGE.format(title=html.escape(title), style=STYLE, nav=nav, body=body, font="{font}",
                       lang="zh-CN" if language() == "zh" else "en")
    # the embedded font holds exactly the characters of the page (samples, corpus names, the Chinese text)
    with atomic_path(out) as tmp:  # whole or not at all; where it may go is runs/folders.py's check (the CLI's)
        tmp.write_text(page.replace("{font}", font_face_css(page), 1), encoding="utf-8")
    return out


def earlier_phase(run_dir: Path) -> list[dict]:
    """The records of the phase before fine-tuning, where a shipped model keeps them (metrics-base.jsonl: the
    base run, with its validation losses), else []; read as metrics.jsonl is, in bounded memory."""
    return read_records(Path(run_dir), name=METRICS_BASE)

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

from scratchformer.inspect.attention import KINDS, attention_maps, plot_kind
from scratchformer.inspect.params import closed_form, parameter_rows, seeds_estimate
from scratchformer.inspect.plots import plot_curves, plot_positions
from scratchformer.inspect.shapes import shape_report

STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1200px; color: #222; line-height: 1.4; }
h1 { border-bottom: 2px solid #446; } h2 { margin-top: 2em; border-bottom: 1px solid #aab; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
td, th { border: 1px solid #ccd; padding: 2px 8px; text-align: left; } th { background: #eef; }
td.num { text-align: right; font-family: monospace; }
pre { background: #f6f6fa; padding: 0.6em; overflow-x: auto; font-size: 0.8em; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.3em 0; }
.note { color: #555; font-style: italic; } nav a { margin-right: 1em; }
.row { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
.row table { font-size: 0.8em; } .summary { background: #eef4ee; padding: 0.5em 1em; border-radius: 4px; }
"""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<link rel="icon" href="data:,"><style>{style}</style></head>
<body><h1>{title}</h1>
<nav>{nav}</nav>
{body}
</body></html>
"""

SECTIONS = (("scores", "Test scores"), ("samples", "Sample translations"), ("curves", "Training and validation curves"),
            ("attention", "Attention, per layer and head"), ("positions", "Positional encoding"),
            ("config", "Config, parameters and shapes"))


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
    params = [(r.component, r.per_layer, r.layers, r.total, r.note) for r in rows]
    params += [("total (exact)", None, None, total, f"{total / 1e6:.2f}M"),
               ("closed form: matrices only", None, None, closed_form(config), ""),
               ("seeds' estimate 12 N d^2 + V d", None, None, seeds_estimate(config), "")]
    fields = [(k, v) for k, v in dataclasses.asdict(config).items() if v not in ({}, None)]
    train = dataclasses.asdict(run.train_config) if run.train_config else {}
    boxes = [("Model (config.json)", table(["field", "value"], [(k, str(v)) for k, v in fields]))]
    if train:
        boxes.append(("Training (train_config.json)",
                      table(["field", "value"], [(k, str(v)) for k, v in train.items() if v is not None])))
    boxes.append(("Parameters per component", table(["component", "per layer", "layers", "total", "note"], params)))
    parts = ['<div class="row">' + "".join(f"<div><h3>{t}</h3>{b}</div>" for t, b in boxes) + "</div>",
             "<h3>Shapes (one batch of 2 random sentences, source length 10, target length 9)</h3>",
              f"<pre>{html.escape(shape_report(run.model, batch=2, src_len=10, tgt_len=9))}</pre>"]
    return "\n".join(parts)


def attention_section(run, sentences: Sequence[tuple[str, str]], folder: Path) -> str:
    """For each (source, translation): a grid of layers x heads for each kind of attention."""
    parts = [f'<p class="note">{len(sentences)} sentence(s), teacher-forced with the model\'s own translation; '
             "rows are layers, columns heads; x: the keys attended to, y: the queries.</p>"]
    for i, (source, translation) in enumerate(sentences):
        maps = attention_maps(run, source, translation)
        parts.append(f"<h3>{html.escape(source)} &rarr; {html.escape(translation)}</h3>")
        for kind, what in KINDS.items():
            path = plot_kind(maps, folder / f"attention-{i}-{kind}.png", kind, title=f"{what}, sentence {i + 1}")
            parts.append(f"<h4>{html.escape(what)}</h4>" + image(path, f"{what}, sentence {i + 1}"))
    return "\n".join(parts)


def samples_section(samples: Sequence[dict]) -> str:
    rows = [(i + 1, s["src"], s["ref"], s["hyp"], s["chrf"]) for i, s in enumerate(samples)]
    return table(["#", "source", "reference", "model (greedy)", "chrF"], rows)


def scores_section(scores: dict) -> str:
    """scores: {"note": str, "rows": [{setting, sentences, bleu, chrf, bleu_signature, chrf_signature}]}."""
    rows = [(r["setting"], r.get("sentences"), r.get("bleu"), r.get("chrf"), r.get("bleu_signature"),
             r.get("chrf_signature")) for r in scores["rows"]]
    return (f'<p class="note">{html.escape(scores["note"])}</p>'
            + table(["setting", "sentences", "BLEU", "chrF", "BLEU signature", "chrF signature"], rows))


def summary(run, samples: Sequence[dict], scores: dict) -> str:
    """One paragraph on top: the model's size and the best stored test score."""
    c = run.model_config
    best = max(scores["rows"], key=lambda r: r.get("bleu") or 0, default=None)
    chrf = f"{best['chrf']:.2f}" if best and isinstance(best.get("chrf"), (int, float)) else "not stored"
    score = (f"test BLEU {best['bleu']:.2f}, chrF {chrf} ({best['setting']}, {best['sentences']} "
             "sentences)" if best else "no test scores")
    return (f'<p class="summary">{c.arch}, {run.model.num_parameters() / 1e6:.2f}M parameters: d_model={c.d_model}, '
            f"{c.n_heads} heads, {c.n_encoder_layers}+{c.n_decoder_layers} layers, {c.norm_placement}-norm, "
            f"{c.positions} positions; {html.escape(score)}; {len(samples)} sample sentence(s).</p>")


def render_report(run, records: Sequence[dict], samples: Sequence[dict], scores: dict, out: str | Path,
                  attention_samples: int = 3) -> Path:
    """Draw every figure and write the page to `out`. samples: [{src, ref, hyp, chrf}]; the first
    `attention_samples` of them get attention heatmaps. Returns the file written."""
    config = run.model_config
    with tempfile.TemporaryDirectory(prefix="scratchformer-report-") as tmp:
        folder = Path(tmp)
        curves = (image(plot_curves(folder / "curve.png", records, title=f"training of {run.path.name}"),
                      "training curves") if records else '<p class="note">no metrics.jsonl in this run</p>')
        pe_note = ("" if config.positions == "sinusoidal" else
                   f'<p class="note">this model uses {config.positions} positions; the sinusoidal table of its '
                   "width is shown for comparison</p>")
        positions = pe_note + image(plot_positions(folder / "positions.png", config.d_model,
                                                   min(config.max_len, 100)), "sinusoidal positional encoding")
        chosen = [(s["src"], s["hyp"]) for s in samples[:attention_samples] if s["src"].strip()]
        bodies = {"config": config_section(run), "curves": curves, "positions": positions,
                  "attention": attention_section(run, chosen, folder), "samples": samples_section(samples),
                  "scores": scores_section(scores)}
    body = summary(run, samples, scores) + "\n".join(f'<h2 id="{key}">{html.escape(title)}</h2>\n{bodies[key]}'
                                                      for key, title in SECTIONS)
    nav = "".join(f'<a href="#{key}">{html.escape(title)}</a>' for key, title in SECTIONS)
    title = f"scratchformer report: {run.path.name}"
    out = Path(out)
    out.write_text(PAGE.format(title=html.escape(title), style=STYLE, nav=nav, body=body), encoding="utf-8")
    return out

"""The run report's measurements: sample translations with per-sentence chrF, and the test scores (stored by
`scripts/ship_checkpoint.py` in README.json, else measured now on a slice of the test split). The page itself is
drawn by inspect/report.py."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scratchformer.config.decoding import DecodingOptions, from_args
from scratchformer.data.corpus import load_pairs
from scratchformer.errors import ConfigError
from scratchformer.runs import Run, load_run
from scratchformer.runs.metrics import read_records


def stored_scores(run: Run) -> list[dict[str, Any]]:
    """README.json's "test" block as score rows ([] if the run has none)."""
    from scratchformer.evaluation.metrics import chrf_signature

    readme = run.path / "README.json"
    tests = json.loads(readme.read_text(encoding="utf-8")).get("test", {}) if readme.is_file() else {}
    rows = []
    for setting, figures in tests.items() if isinstance(tests, dict) else ():
        if isinstance(figures, dict) and "bleu" in figures:
            rows.append({"setting": "greedy" if setting == "beam1" else setting.replace("beam", "beam "),
                         "sentences": figures.get("sentences"), "bleu": figures.get("bleu"),
                         "chrf": figures.get("chrf"), "bleu_signature": figures.get("bleu_signature"),
                         "chrf_signature": figures.get("chrf_signature") or f"{chrf_signature()} (chrF's default)"})
    return rows


def report_figures(run: Run, pairs: list[tuple[str, str]], samples: int = 3, limit: int = 100,
                   options: DecodingOptions | None = None) -> tuple[list[dict], dict]:
    """(samples [{src, ref, hyp, chrf}], scores {note, rows}) of `run` on the test `pairs`, translated with
    `options` (default: the run's decoding.json) through engines.Translator."""
    from scratchformer.engines import Translator
    from scratchformer.evaluation.metrics import sentence_chrf
    from scratchformer.evaluation.translation import evaluate_pairs

    options = options or run.decoding
    chosen = [p for p in pairs if p[0].strip()][:samples]
    hyps = Translator(run, options).translate([s for s, _ in chosen]) if chosen else []
    rows = [{"src": s, "ref": r, "hyp": h, "chrf": sentence_chrf(h, r)} for (s, r), h in zip(chosen, hyps)]
    stored = stored_scores(run)
    if stored:
        return rows, {"note": f"stored in {run.path / 'README.json'} when the model was shipped", "rows": stored}
    if not pairs:
        return rows, {"note": "the test split is empty: no scores", "rows": []}
    result = evaluate_pairs(run, pairs[:limit], options, progress=True)
    setting = "greedy" if options.beam == 1 else f"beam {options.beam}"
    row = {"setting": setting, "sentences": result["sentences"], "bleu": result["bleu"], "chrf": result["chrf"],
           "bleu_signature": result["bleu_signature"], "chrf_signature": result["chrf_signature"]}
    note = (f"the run has no stored test scores: measured now, {setting}, on the first {result['sentences']} of "
            f"{len(pairs)} test sentences")
    return rows, {"note": note, "rows": [row]}


def write_run_report(run_dir: str | Path, out: str | Path, samples: int = 3, limit: int = 100,
                     corpus: str | None = None, decoding: Mapping[str, Any] | None = None) -> Path:
    """The self-contained HTML report of a translation run; returns the file written. decoding: options by name
    (report's decoding flags) over the run's decoding.json."""
    from scratchformer.inspect.report import render_report

    if samples < 1 or limit < 1:
        raise ConfigError(f"--samples {samples} / --limit {limit}: give numbers >= 1")
    run = load_run(run_dir)
    if run.model_config.arch != "encoder-decoder":
        raise ConfigError(f"{run_dir} holds a {run.model_config.arch} model: the report is for translation "
                          "(encoder-decoder) runs")
    source = corpus or (run.train_config.corpus if run.train_config else None)
    if source is None:
        raise ConfigError(f"{run_dir} has no train_config.json naming its corpus: pass --corpus")
    rows, scores = report_figures(run, load_pairs(source, "test", on_error="skip"), samples, limit,
                                  from_args(run.decoding, decoding or {}))
    return render_report(run, read_records(run.path), rows, scores, out, attention_samples=samples)

"""The run report's measurements: sample translations with per-sentence chrF, and the test scores (stored by
`scripts/ship_checkpoint.py` in README.json, else measured now on a slice of the test split). The page itself is
drawn by inspect/report.py."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scratchformer.config.decoding import DecodingOptions
from scratchformer.config.decoding_flags import from_args
from scratchformer.data.corpus import load_pairs
from scratchformer.errors import N_, ConfigError
from scratchformer.runs import Run, load_run
from scratchformer.runs.metrics import read_records
from scratchformer.runs.names import README_JSON
from scratchformer.runs.run import read_readme, setting_name


def _number(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def stored_scores(run: Run) -> list[dict[str, Any]]:
    """README.json's "test" block as score rows ([] if the run has none). The file is not trusted: it must be a
    JSON object (else one ConfigError naming it); a setting whose BLEU is not a number is no row, and any other
    figure that is not a number (chrF null) or a string is shown as missing."""
    from scratchformer.evaluation.metrics import chrf_signature

    tests = read_readme(run.path).get("test", {})
    rows = []
    for setting, figures in tests.items() if isinstance(tests, dict) else ():
        if isinstance(figures, dict) and _number(figures.get("bleu")) is not None:
            text = {k: figures.get(k) if isinstance(figures.get(k), str) else None
                    for k in ("bleu_signature", "chrf_signature")}
            sentences = figures.get("sentences")
            rows.append({"setting": setting_name(setting),
                         "sentences": sentences if isinstance(sentences, int) and not isinstance(sentences, bool)
                         else None, "bleu": figures["bleu"], "chrf": _number(figures.get("chrf")),
                         "bleu_signature": text["bleu_signature"],
                         "chrf_signature": text["chrf_signature"] or f"{chrf_signature()} (chrF's default)"})
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
        return rows, {"note": f"stored in {run.path / README_JSON} when the model was shipped", "rows": stored}
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
        raise ConfigError(N_("--samples {samples} / --limit {limit}: give numbers >= 1"), samples=samples,
                          limit=limit)
    run = load_run(run_dir)
    if run.model_config.arch != "encoder-decoder":
        raise ConfigError(N_("{run_dir} holds a {arch} model: the report is for translation (encoder-decoder) runs"),
                          run_dir=run_dir, arch=run.model_config.arch)
    source = corpus or (run.train_config.corpus if run.train_config else None)
    if source is None:
        raise ConfigError(N_("{run_dir} has no train_config.json naming its corpus: pass --corpus"), run_dir=run_dir)
    holdout = run.train_config.holdout if run.train_config and not corpus else "none"  # the run's own test split
    rows, scores = report_figures(run, load_pairs(source, "test", on_error="skip", holdout=holdout), samples, limit,
                                  from_args(run.decoding, decoding or {}))
    return render_report(run, read_records(run.path), rows, scores, out, attention_samples=samples)

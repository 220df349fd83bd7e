"""Score a translation run on each source's test (or valid) split of the bundled `software` corpus: the
per-source table of docs/translation.md (sacreBLEU / chrF, the spurious 「」 rate, unseen character 4-grams in
outputs and references).

    python scripts/eval_software.py models/en-zh --label after --out experiments/software/software_eval.jsonl
    python scripts/eval_software.py runs/software --split valid --beam 1

Each source is one `evaluate_run(RUN, split=f"{split}-{source}", corpus="software")`, the same as
`scratchformer evaluate RUN --corpus software --split test-SOURCE --beam 4 --json`. --out appends one JSON line per
source (with --label and the date), so before/after rows of several models sit in one file. --confidence adds
BLEU's 95% bootstrap interval (± its half-width): a split of 66 paragraphs is a small sample.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

from scratchformer.data.corpus import CORPORA_DIR, load_pairs
from scratchformer.errors import ScratchformerError
from scratchformer.evaluation.metrics import BOOTSTRAP_RESAMPLES
from scratchformer.evaluation.translation import evaluate_pairs, train_targets
from scratchformer.runs import load_run

FIELDS = ("bleu", "chrf", "spurious_quote_rate", "unseen_4grams_hyp", "unseen_4grams_ref", "sentences", "seconds")


def sources() -> list[str]:
    """The sources of the bundled corpus, in STATS.json's order (LibreOffice first)."""
    stats = json.loads((CORPORA_DIR / "software" / "STATS.json").read_text(encoding="utf-8"))
    return list(stats["sources"])


def score_sources(run_dir: Path, split: str = "test", beam: int | None = None, weights: Path | None = None,
                  only: list[str] | None = None, limit: int | None = None, split_sentences: bool | None = None,
                  alpha: float | None = None, repair_copies: bool | None = None,
                  confidence: int = 0, ensemble: list[Path] | None = None) -> dict[str, dict]:
    """{source: evaluate_pairs' result} on `split`-SOURCE of `software`; the run and its training targets are
    loaded once for all sources; decoding options left None are the run's own (decoding.json); confidence N:
    BLEU's 95% bootstrap half-width from N resamples too ("bleu_ci95"); ensemble: more members' weights (None: the
    run's decoding.json's)."""
    run = load_run(run_dir, weights, ensemble=ensemble)
    targets = train_targets(run)
    given = {k: v for k, v in dict(beam=beam, alpha=alpha, split_sentences=split_sentences,
                                   repair_copies=repair_copies).items() if v is not None}
    return {source: evaluate_pairs(run, load_pairs("software", f"{split}-{source}", on_error="skip")[:limit],
                                   train_targets=targets, confidence=confidence, **given)
            for source in only or sources()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--split", default="test", choices=("test", "valid"))
    ap.add_argument("--beam", type=int, default=None, help="beam size (default: the run's decoding.json, else 4)")
    ap.add_argument("--weights", type=Path, help="a checkpoint's weights instead of the run's model.safetensors "
                    "(decoded alone unless --ensemble is given too)")
    ap.add_argument("--ensemble", type=Path, nargs="+", metavar="WEIGHTS",
                    help="more members' weights, decoded with the model (default: the run's decoding.json's)")
    ap.add_argument("--only", nargs="+", help="these sources only")
    ap.add_argument("--split-sentences", action=argparse.BooleanOptionalAction, default=None,
                    help="translate each source sentence by sentence (default: the run's decoding.json)")
    ap.add_argument("--repair-copies", action=argparse.BooleanOptionalAction, default=None,
                    help="put back miscopied names and numbers (default: the run's decoding.json)")
    ap.add_argument("--alpha", type=float, default=None,
                    help="the length penalty's exponent (GNMT; default: the run's decoding.json, else 0.6)")
    ap.add_argument("--confidence", action="store_true",
                    help="BLEU's 95%% bootstrap interval per source (sacreBLEU's --confidence, 1000 resamples)")
    ap.add_argument("--label", default="", help="a name for the rows in --out (e.g. before, after)")
    ap.add_argument("--out", type=Path, help="append one JSON line per source here")
    args = ap.parse_args()
    unknown = sorted(set(args.only or ()) - set(sources()))
    if unknown:
        ap.error(f"--only {' '.join(unknown)}: not a source of the software corpus ({', '.join(sources())})")
    try:
        scores = score_sources(args.run_dir, args.split, args.beam, args.weights, args.only,
                               split_sentences=args.split_sentences, alpha=args.alpha,
                               repair_copies=args.repair_copies,
                               confidence=BOOTSTRAP_RESAMPLES if args.confidence else 0, ensemble=args.ensemble)
    except ScratchformerError as e:
        ap.exit(2, f"{ap.prog}: error: {e}\n")

    rows = []
    print("| source | BLEU / chrF | 「」 where the reference has none | unseen char 4-grams: output / reference |")
    print("| --- | --- | ---: | --- |")
    for source, r in scores.items():
        row = {"label": args.label, "run": str(args.run_dir), "weights": str(args.weights or ""),
               **({"ensemble": [str(p) for p in args.ensemble]} if args.ensemble else {}), "source": source,
               "split": args.split, "beam": r["beam"], "alpha": r["alpha"], "split_sentences": r["split_sentences"],
               "repair_copies": r["repair_copies"],
               "date": datetime.date.today().isoformat(),
               **{k: r.get(k) for k in FIELDS}, **{k: r[k] for k in ("bleu_ci95", "ensemble_size") if k in r}}
        rows.append(row)
        unseen = (f"{row['unseen_4grams_hyp']:.0%} / {row['unseen_4grams_ref']:.0%}"
                  if row["unseen_4grams_hyp"] is not None else "")
        ci = f" ± {row['bleu_ci95']}" if "bleu_ci95" in row else ""
        print(f"| {source} | {row['bleu']}{ci} / {row['chrf']} | {row['spurious_quote_rate']:.1%} | {unseen} |",
              flush=True)
    if args.out:
        with args.out.open("a", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

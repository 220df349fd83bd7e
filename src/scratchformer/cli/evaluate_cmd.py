"""`scratchformer evaluate RUN_DIR`: sacreBLEU / chrF on a split (translation), perplexity (language model),
accuracy vs the majority class (classifier) or masked-token accuracy (masked LM). Wiring only: the run's
config.json picks the evaluator, which loads the run once."""

from __future__ import annotations

import argparse
import json

from scratchformer.cli.common import sample_lines


def _check_flags(args: argparse.Namespace) -> None:
    """Flags that would silently score other data than asked (`--limit 0` meant all, `--limit -2` a slice)."""
    from scratchformer.errors import ConfigError
    from scratchformer.evaluation.metrics import MAX_BOOTSTRAP_RESAMPLES

    if args.limit is not None and args.limit < 1:
        raise ConfigError("--limit {limit}: give a number of sentences >= 1 (leave it out for all)", limit=args.limit)
    if args.show < 0:
        raise ConfigError("--show {show}: give a number of samples >= 0", show=args.show)
    from scratchformer.config.decoding import DecodingOptions
    from scratchformer.config.decoding_flags import from_args

    from_args(DecodingOptions(), args)  # the flags alone, made (so checked) before any loading
    if not 2 <= args.confidence_n <= MAX_BOOTSTRAP_RESAMPLES:
        raise ConfigError("--confidence-n {n}: give the number of bootstrap resamples, 2 or more, at most {most:,} "
                          "(1000 is usual)", n=args.confidence_n, most=MAX_BOOTSTRAP_RESAMPLES)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Score the run with the evaluator of its architecture; print the result (or JSON with --json)."""
    from scratchformer.runs import load_config

    _check_flags(args)
    arch = load_config(args.run_dir).arch  # config.json only: the evaluator loads the model
    if args.explain and arch != "encoder-decoder":
        from scratchformer.errors import N_, ConfigError

        raise ConfigError(N_("--explain takes BLEU apart: {run_dir} holds a {arch} model, which has no BLEU"),
                          run_dir=args.run_dir, arch=arch)
    from scratchformer.config.decoding import flag_of
    from scratchformer.config.decoding_flags import given_flags

    given = [(flag_of(name, value), value) for name, value in given_flags(args).items()]
    for flag, value in (*given, ("--confidence", args.confidence), ("--ensemble", args.ensemble)):
        if value not in (None, False) and arch != "encoder-decoder":
            from scratchformer.errors import N_, ConfigError

            raise ConfigError(N_("{flag} is for translation: {run_dir} holds a {arch} model"), flag=flag,
                              run_dir=args.run_dir, arch=arch)
    if arch == "decoder":
        from scratchformer.evaluation.lm import evaluate_lm

        result = evaluate_lm(args.run_dir, args.split, weights=args.weights, corpus=args.corpus)
    elif arch == "encoder":
        from scratchformer.evaluation.encoder import evaluate_encoder

        result = evaluate_encoder(args.run_dir, args.split, weights=args.weights, corpus=args.corpus)
    else:
        from scratchformer.evaluation.translation import Scoring, evaluate_run

        scoring = Scoring(args.explain, args.confidence_n if args.confidence else 0, progress=True)
        result = evaluate_run(args.run_dir, args.split, args.limit, args.show, args.corpus, args.weights,
                              args.ensemble, scoring, **given_flags(args))
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return 0
    explained = result.pop("bleu_explained", None)
    for sample in result.pop("samples", []):
        print(sample_lines(sample) + "\n")
    for key, value in result.items():
        print(f"{key:16s} {value}")
    if explained:
        from scratchformer.evaluation.metrics import format_bleu_explained

        print("\n" + format_bleu_explained(explained))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `evaluate` subcommand."""
    from scratchformer.config.decoding_flags import add_decoding_args

    p = sub.add_parser("evaluate", help="BLEU/chrF (translation), perplexity (language model) or accuracy "
                       "(encoder tasks) on a split")
    p.add_argument("run_dir")
    p.add_argument("--split", default="test")
    p.add_argument("--limit", type=int, help="only the first N sentences")
    p.add_argument("--show", type=int, default=3, help="print N sample translations")
    p.add_argument("--corpus", help="evaluate on another corpus than the one trained on")
    p.add_argument("--weights", help="another safetensors file of the run (e.g. averaged.safetensors); it "
                   "decodes alone unless --ensemble is given too")
    p.add_argument("--ensemble", nargs="+", metavar="WEIGHTS", help="translation, --engine torch: more safetensors "
                   "files of the run, decoded with it (the mean of their probabilities; default: decoding.json's)")
    p.add_argument("--explain", action="store_true", help="translation: BLEU taken apart (1-4-gram precisions, "
                   "brevity penalty) beside sacreBLEU's score, and why seed 001's unigram 'simple BLEU' differs")
    p.add_argument("--confidence", action="store_true", help="translation: BLEU's 95%% interval, from bootstrap "
                   "resampling of the sentences (as sacreBLEU's --confidence); printed as bleu_ci95, the half-width")
    # metrics.BOOTSTRAP_RESAMPLES, not imported here: building the parser must not load sacreBLEU and torch
    p.add_argument("--confidence-n", type=int, default=1000, help="bootstrap resamples for --confidence")
    p.add_argument("--json", action="store_true")
    add_decoding_args(p.add_argument_group("translation: decoding options (config/decoding.py; default: the run's "
                                           "decoding.json)"), "evaluate")
    p.set_defaults(func=cmd_evaluate)


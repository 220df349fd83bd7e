"""`scratchformer export RUN_DIR --format ctranslate2|hf|onnx --out DIR`: the trained model in another library's
format (engines/). Wiring only."""

from __future__ import annotations

import argparse
import json
import sys
import time

from scratchformer.i18n import _


def cmd_export(args: argparse.Namespace) -> int:
    from scratchformer.export import export_run

    # one line per phase on stderr, once the checks have passed (with what the format says of its own duration)
    start = time.perf_counter()
    out = export_run(args.run_dir, args.format, args.out, overwrite=args.overwrite, quantization=args.quantization,
                     progress=lambda line: _phase(args))
    print(_("export: done in {seconds:.1f} s").format(seconds=time.perf_counter() - start), file=sys.stderr, flush=True)
    print(json.dumps({"run_dir": args.run_dir, "format": args.format, "out": str(out)}))
    return 0


def _phase(args: argparse.Namespace) -> None:
    """export_run's progress line (it calls this once the checks have passed), in the user's language."""
    print(_("export: {run} -> {format} in {out} (converting and writing; onnx traces the model, a minute or more) ...")
          .format(run=args.run_dir, format=args.format, out=args.out), file=sys.stderr, flush=True)


def register(sub: argparse._SubParsersAction) -> None:
    from scratchformer.cli.common import LazyChoices

    p = sub.add_parser("export", help="export a trained run to CTranslate2, Hugging Face or ONNX")
    p.add_argument("run_dir")
    p.add_argument("--format", required=True, choices=LazyChoices("scratchformer.export.formats", "FORMATS"),
                   metavar="FORMAT", help="the format to write: %(choices)s")
    p.add_argument("--out", required=True, help="output folder (new or empty, or an earlier export with --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier export in --out (only the files export wrote; yours are kept and named)")
    p.add_argument("--quantization", choices=["float32", "int8"], default=None,
                   help="weights of the exported model (ctranslate2: float32 or int8; default float32)")
    p.set_defaults(func=cmd_export)

"""`scratchformer report RUN_DIR --out report.html`: one self-contained HTML page of a translation run; wiring
only."""

from __future__ import annotations

import argparse

from scratchformer.i18n import _


def cmd_report(args: argparse.Namespace) -> int:
    """Write the report and say where."""
    from scratchformer.config.decoding_flags import given_flags
    from scratchformer.evaluation.report import write_run_report
    from scratchformer.runs.folders import check_file

    out = check_file(args.out, "report", args.overwrite)  # before any work: never a run's file, nor one of yours
    if args.screenshot:
        check_file(args.screenshot, "report", args.overwrite, flag="--screenshot")
    path = write_run_report(args.run_dir, out, args.samples, args.limit, args.corpus, given_flags(args))
    print(_("wrote {path} ({mb:.1f} MB, self-contained: open it in any browser)").format(
        path=path, mb=path.stat().st_size / 1e6))
    if args.screenshot:
        from scratchformer.inspect.browser import screenshot

        seen = screenshot(path, args.screenshot)
        print(_("wrote {path} (headless chromium: {images} images, {messages} console messages)").format(
            path=args.screenshot, images=seen["images"], messages=len(seen["console"])))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `report` subcommand."""
    from scratchformer.config.decoding_flags import add_decoding_args

    p = sub.add_parser("report", help="a self-contained HTML report of a translation run (config, curves, "
                       "attention of every kind, samples, test scores)")
    p.add_argument("run_dir")
    p.add_argument("--out", required=True, help=_("the HTML file to write"))
    p.add_argument("--overwrite", action="store_true", help="replace the files --out / --screenshot name if they "
                   "exist (never one of a run's own files)")
    p.add_argument("--samples", type=int, default=3, help=_("sample sentences (each gets attention heatmaps)"))
    p.add_argument("--limit", type=int, default=100,
                   help=_("test sentences to score when the run has no stored test scores"))
    p.add_argument("--corpus", help=_("take the test sentences from another corpus than the one trained on"))
    p.add_argument("--screenshot", help=_("also save the top of the page, as headless chromium shows it, to this PNG"))
    add_decoding_args(p.add_argument_group("decoding of the samples and the scores measured now (config/decoding.py; "
                                           "default: the run's decoding.json)"), "report")
    p.set_defaults(func=cmd_report)

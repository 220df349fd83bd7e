"""`scratchformer translate RUN_DIR "text" ...`: one line in, one line out (arguments, a file, or stdin)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _inputs(args: argparse.Namespace) -> list[str]:
    if args.file:
        stream = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")
        with stream:
            return [line.rstrip("\n") for line in stream]
    if args.text and args.text != ["-"]:
        return list(args.text)
    return [line.rstrip("\n") for line in sys.stdin]


def cmd_translate(args: argparse.Namespace) -> int:
    from scratchformer.cli.common import set_threads
    from scratchformer.decoding import translate_texts
    from scratchformer.runs import load_run

    set_threads(args.threads)
    run = load_run(args.run_dir, args.weights)
    if args.int8:
        from scratchformer.decoding.quantize import quantize_int8

        run.model = quantize_int8(run.model)
    texts = _inputs(args)
    outputs = translate_texts(run.model, run.src_tok, run.tgt_tok, texts, beam=args.beam, alpha=args.alpha,
                              batch_size=args.batch_size, max_tokens=args.max_tokens, max_len=args.max_len)
    for line in outputs:
        print(line, flush=True)
    if args.show_attention:
        import warnings

        from scratchformer.errors import InputError
        from scratchformer.inspect.attention import plot_cross_attention

        if not texts or not texts[0].strip():
            raise InputError(f"--show-attention {args.show_attention}: it draws the first sentence, and "
                             f"{'there is none' if not texts else 'it is empty'}; give a non-empty first sentence")
        with warnings.catch_warnings():  # a missing-font warning as one line, like an error
            warnings.showwarning = lambda message, *_: print(f"scratchformer translate: warning: {message}",
                                                             file=sys.stderr)
            path = plot_cross_attention(run, texts[0], outputs[0], Path(args.show_attention))
        print(f"cross-attention heatmap: {path}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("translate", help="translate text with a trained run")
    p.add_argument("run_dir")
    p.add_argument("text", nargs="*", help="sentences to translate (none or '-' reads stdin, one per line)")
    p.add_argument("--file", help="read sentences from FILE ('-' for stdin), one per line")
    p.add_argument("--beam", type=int, default=4, help="beam size (1 = greedy); the paper uses 4")
    p.add_argument("--alpha", type=float, default=0.6, help="GNMT length penalty ((5+|Y|)/6)^alpha")
    p.add_argument("--batch-size", type=int, default=32, help="sentences decoded together (default 32)")
    p.add_argument("--max-tokens", type=int, default=None, help="also cap a batch at this many padded source tokens")
    p.add_argument("--max-len", type=int, default=None,
                   help="most output tokens per sentence (default: source length + 50, the paper's rule)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--weights", help="another safetensors file of the same run (e.g. averaged.safetensors)")
    p.add_argument("--int8", action="store_true", help="dynamic int8 quantisation of Linear layers (CPU)")
    p.add_argument("--show-attention", metavar="PNG", help="write the first sentence's cross-attention heatmap")
    p.set_defaults(func=cmd_translate)

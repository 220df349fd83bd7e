"""`scratchformer translate RUN_DIR "text" ...`: one line in, one line out (arguments, a file, or stdin)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _inputs(args: argparse.Namespace) -> list[str]:
    from scratchformer.cli.common import check_text_args, read_lines

    if args.file:
        return read_lines(args.file)
    if args.text and args.text != ["-"]:
        return check_text_args(list(args.text))
    return read_lines("-")


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse what makes no sense before the (slow) model load."""
    from scratchformer.errors import ConfigError

    if args.file and args.text:
        raise ConfigError(f"--file {args.file} and {len(args.text)} sentence argument(s): give one or the other")


def _check_arch(args: argparse.Namespace, arch: str) -> None:
    from scratchformer.errors import ConfigError

    if arch == "decoder":
        raise ConfigError(f"{args.run_dir} holds a decoder (language-model) run, which continues text rather than "
                          f"translating it: use `scratchformer generate {args.run_dir} ...`")
    if arch == "encoder":
        raise ConfigError(f"{args.run_dir} holds an encoder (classifier / masked-LM) run, which does not generate "
                          f"text: use `scratchformer evaluate {args.run_dir}`")


def cmd_translate(args: argparse.Namespace) -> int:
    from scratchformer.cli.common import set_threads
    from scratchformer.decoding import translate_texts
    from scratchformer.decoding.translate import check_translate_options
    from scratchformer.runs import load_run

    _check_flags(args)
    set_threads(args.threads)
    run = load_run(args.run_dir, args.weights)
    _check_arch(args, run.model_config.arch)
    check_translate_options(run.model, args.beam, args.alpha, args.batch_size, args.max_tokens, args.max_len, cli=True)
    if args.int8 and args.engine != "ctranslate2":  # ctranslate2 quantizes its own export (int8=True)
        from scratchformer.decoding.quantize import quantize_int8

        run.model = quantize_int8(run.model)
    texts = _inputs(args)
    if args.engine == "torch":
        outputs = translate_texts(run.model, run.src_tok, run.tgt_tok, texts, beam=args.beam, alpha=args.alpha,
                                  batch_size=args.batch_size, max_tokens=args.max_tokens, max_len=args.max_len)
    else:
        from scratchformer.engines import make_translator

        options = {"int8": True} if args.int8 and args.engine == "ctranslate2" else {}
        outputs = make_translator(run, args.engine, **options).translate(texts, beam=args.beam, alpha=args.alpha,
                                                              max_len=args.max_len, batch_size=args.batch_size)
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
    p.add_argument("--engine", default="torch", choices=["torch", "ctranslate2", "onnxruntime"],
                   help="decode with our PyTorch code (default) or an exported copy (cached in the run directory)")
    p.add_argument("--int8", action="store_true", help="dynamic int8 quantisation of Linear layers (CPU)")
    p.add_argument("--show-attention", metavar="PNG", help="write the first sentence's cross-attention heatmap")
    p.set_defaults(func=cmd_translate)

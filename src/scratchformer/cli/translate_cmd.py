"""`scratchformer translate RUN_DIR "text" ...`: one line in, one line out (arguments, a file, or stdin).

With --n-best, --align or --format jsonl, one input gives its hypotheses (decoding/results.py); the decoding
options (--n-best, --no-repeat-ngram, --repetition-penalty, --prefix, --align) are our own decoder's (--engine
torch). --alpha, --split-sentences and --repair-copies default to the run's own (RUN_DIR/decoding.json,
config/decoding.py) and work with every engine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The options only --engine torch has: flag, attribute, its "off" value.
TORCH_ONLY = (("--n-best", "n_best", 1), ("--format", "format", "text"), ("--no-repeat-ngram", "no_repeat_ngram", 0),
              ("--repetition-penalty", "repetition_penalty", 1.0), ("--prefix", "prefix", None),
              ("--align", "align", False), ("--ensemble", "ensemble", None))


def _inputs(args: argparse.Namespace) -> list[str]:
    from scratchformer.cli.common import check_text_args, read_lines

    if args.file:
        return read_lines(args.file)
    if args.text and args.text != ["-"]:
        return check_text_args(list(args.text))
    return read_lines("-")


def _jsonl_inputs(lines: list[str], default_prefix: str | None) -> tuple[list[str], list[str | None]]:
    """--input-format jsonl: sources and per-line prefixes from `{"src": ..., "prefix": ...}` lines ("prefix"
    optional, else --prefix); an empty line is an empty source."""
    import json

    from scratchformer.config.fields import loads_json
    from scratchformer.errors import InputError

    texts, prefixes = [], []
    for n, line in enumerate(lines, start=1):
        try:
            obj = loads_json(line) if line.strip() else {"src": ""}
        except json.JSONDecodeError as e:
            raise InputError(f"input line {n} is not JSON ({e.msg}): --input-format jsonl reads "
                             '{"src": ..., "prefix": ...} lines') from None
        if not isinstance(obj, dict) or not isinstance(obj.get("src"), str):
            raise InputError(f'input line {n}: give an object with a "src" string, got {line[:60]!r}')
        prefix = obj.get("prefix", default_prefix)
        if prefix is not None and not isinstance(prefix, str):
            raise InputError(f'input line {n}: "prefix" must be a string, got {type(prefix).__name__}')
        texts.append(obj["src"])
        prefixes.append(prefix)
    return texts, prefixes


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse what makes no sense before the (slow) model load."""
    from scratchformer.errors import ConfigError

    if args.file and args.text:
        raise ConfigError(f"--file {args.file} and {len(args.text)} sentence argument(s): give one or the other")
    if args.engine != "torch":
        for flag, name, off in TORCH_ONLY:
            if getattr(args, name) != off:
                value = "" if isinstance(off, bool) else f" {getattr(args, name)}"
                raise ConfigError(f"{flag}{value}: only --engine torch (our own decoder) has this option; the "
                                  f"{args.engine} engine gives the best translation as text")


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
    from scratchformer.decoding.translate import check_translate_options, translate_with
    from scratchformer.errors import ConfigError
    from scratchformer.runs import load_run

    _check_flags(args)
    set_threads(args.threads)
    run = load_run(args.run_dir, args.weights, ensemble=args.ensemble)
    _check_arch(args, run.model_config.arch)
    decoding = run.decoding.pick(alpha=args.alpha, split_sentences=args.split_sentences,
                                 repair_copies=args.repair_copies)
    check_translate_options(run.model, args.beam, decoding.alpha, args.batch_size, args.max_tokens, args.max_len,
                            cli=True, n_best=args.n_best, no_repeat_ngram=args.no_repeat_ngram,
                            repetition_penalty=args.repetition_penalty,
                            members=1 + len(run.members) if args.engine == "torch" else 1)
    if args.int8 and args.engine != "ctranslate2":  # ctranslate2 quantizes its own export (int8=True)
        from scratchformer.decoding.quantize import quantize_int8

        run.model, run.members = quantize_int8(run.model), [quantize_int8(m) for m in run.members]
    texts, prefix = _inputs(args), args.prefix
    if args.input_format == "jsonl":
        texts, prefix = _jsonl_inputs(texts, args.prefix)
        if args.engine != "torch" and any(prefix):
            raise ConfigError(f'"prefix" in the input: only --engine torch has forced prefixes; the {args.engine} '
                              "engine gives the best translation as text")
    from scratchformer.data.language import warn_wrong_language  # a mostly-CJK input to an en->zh model: one line

    warn_wrong_language(texts, run.train_config.corpus if run.train_config else None)
    structured = args.n_best > 1 or args.align or args.format == "jsonl"
    if args.engine == "torch":
        outputs = translate_texts(run.model, run.src_tok, run.tgt_tok, texts, beam=args.beam, alpha=decoding.alpha,
                                  batch_size=args.batch_size, max_tokens=args.max_tokens, max_len=args.max_len,
                                  n_best=args.n_best, no_repeat_ngram=args.no_repeat_ngram,
                                  repetition_penalty=args.repetition_penalty, prefix=prefix,
                                  split_sentences=decoding.split_sentences, repair_copies=decoding.repair_copies,
                                  align=args.align, return_hyps=structured, ensemble=run.members)
    else:
        from scratchformer.engines import make_translator

        options = {"int8": True} if args.int8 and args.engine == "ctranslate2" else {}
        translator = make_translator(run, args.engine, **options)
        outputs = translate_with(lambda pieces: translator.translate(pieces, beam=args.beam, alpha=decoding.alpha,
                                                                     max_len=args.max_len, batch_size=args.batch_size),
                                 texts, decoding.split_sentences, decoding.repair_copies)
    _print(outputs, args)
    if structured:
        outputs = [t.hyps[0].text for t in outputs]
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


def _print(outputs: list, args: argparse.Namespace) -> None:
    """One line per input (text), N per input (--n-best N), or one JSON object per input (--format jsonl)."""
    import json

    for out in outputs:
        if args.format == "jsonl":
            lines = [json.dumps(out.to_dict(), ensure_ascii=False)]
        else:
            lines = out.text_lines(scores=args.n_best > 1) if not isinstance(out, str) else [out]
        for line in lines:
            print(line, flush=True)


def register(sub: argparse._SubParsersAction) -> None:
    from scratchformer.cli.common import add_decoding_args

    p = sub.add_parser("translate", help="translate text with a trained run")
    p.add_argument("run_dir")
    p.add_argument("text", nargs="*", help="sentences to translate (none or '-' reads stdin, one per line)")
    p.add_argument("--file", help="read sentences from FILE ('-' for stdin), one per line")
    p.add_argument("--beam", type=int, default=4, help="beam size (1 = greedy); the paper uses 4")
    p.add_argument("--batch-size", type=int, default=32, help="sentences decoded together (default 32)")
    p.add_argument("--max-tokens", type=int, default=None, help="also cap a batch at this many padded source tokens")
    p.add_argument("--max-len", type=int, default=None,
                   help="most output tokens per sentence (default: source length + 50, the paper's rule)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--weights", help="another safetensors file of the same run (e.g. averaged.safetensors); it "
                   "decodes alone unless --ensemble is given too")
    p.add_argument("--ensemble", nargs="+", metavar="WEIGHTS", help="more safetensors files of the same run, "
                   "decoded with it: the mean of their probabilities (default: decoding.json's ensemble)")
    p.add_argument("--engine", default="torch", choices=["torch", "ctranslate2", "onnxruntime"],
                   help="decode with our PyTorch code (default) or an exported copy (cached in the run directory)")
    p.add_argument("--int8", action="store_true", help="dynamic int8 quantisation of Linear layers (CPU)")
    p.add_argument("--show-attention", metavar="PNG", help="write the first sentence's cross-attention heatmap")
    d = p.add_argument_group("decoding options (--engine torch)")
    d.add_argument("--n-best", type=int, default=1, metavar="N",
                   help="the N best hypotheses (N <= --beam), each as a line `text<TAB>score` (N lines per input; "
                        "score: log P / ((5+|Y|)/6)^alpha, beam search's own)")
    d.add_argument("--format", choices=["text", "jsonl"], default="text",
                   help='output: lines of text (default), or one JSON object per input: {"src": ..., "hyps": '
                        '[{"text": ..., "score": ..., "tokens": [target ids]}]}')
    d.add_argument("--input-format", choices=["text", "jsonl"], default="text",
                   help='input: lines of text (default), or JSON lines {"src": ..., "prefix": ...} ("prefix" '
                        "optional: that line's forced start, else --prefix)")
    d.add_argument("--no-repeat-ngram", type=int, default=0, metavar="N",
                   help="never repeat an n-gram of N target tokens (fairseq's; 0 = off, 3 is usual)")
    d.add_argument("--repetition-penalty", type=float, default=1.0, metavar="P",
                   help="divide the logits of tokens already output by P (multiply if negative; CTRL's; 1 = off)")
    d.add_argument("--prefix", metavar="TEXT", help="force every translation to start with TEXT (kept in the output)")
    d.add_argument("--align", action="store_true",
                   help="add word alignments `i-j` (source-target subword token indices, from the last decoder "
                        "layer's cross-attention averaged over heads) after a TAB, or as \"alignment\" in jsonl")
    add_decoding_args(p.add_argument_group("decoding options of every engine (default: the run's decoding.json)"))
    p.set_defaults(func=cmd_translate)

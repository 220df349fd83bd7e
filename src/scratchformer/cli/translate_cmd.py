"""`scratchformer translate RUN_DIR "text" ...`: one line in, one line out (arguments, a file, or stdin).

The decoding flags and `--set KEY=VALUE` are made from config/decoding_flags.py's table and default to the run's own
(RUN_DIR/decoding.json); everything goes through engines.Translator, which refuses, in one line naming the backend,
an option the chosen engine does not have (the options' one check against the model and backend). A file or stdin
is read, translated and printed in chunks of CHUNK lines, so a file of any size streams. With --n-best, --align or
--format jsonl, one input gives its hypotheses (decoding/results.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from scratchformer.i18n import N_, _

CHUNK = 1000  # lines read, translated and printed together: memory stays bounded whatever the input's size


def _inputs(args: argparse.Namespace) -> Iterable[str]:
    from scratchformer.cli.common import check_text_args, iter_lines

    if args.file:
        return iter_lines(args.file)
    if args.text and args.text != ["-"]:
        return check_text_args(list(args.text))
    return iter_lines("-")


def _jsonl_inputs(lines: list[str], default_prefix: str | None) -> tuple[list[str], list[str | None]]:
    """--input-format jsonl: sources and per-line prefixes from `{"src": ..., "prefix": ...}` lines ("prefix"
    optional, else --prefix); an empty line is an empty source."""
    import json

    from scratchformer.cli.common import check_utf8
    from scratchformer.config.fields import loads_json
    from scratchformer.errors import InputError

    texts, prefixes = [], []
    for n, line in enumerate(lines, start=1):
        try:
            obj = loads_json(line) if line.strip() else {"src": ""}
        except json.JSONDecodeError as e:
            raise InputError("input line {n} is not JSON ({reason}): --input-format jsonl reads {{\"src\": ..., "
                             "\"prefix\": ...}} lines", n=n, reason=e.msg) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("src"), str):
            raise InputError('input line {n}: give an object with a "src" string, got {got!r}', n=n, got=line[:60])
        prefix = obj.get("prefix", default_prefix)
        if prefix is not None and not isinstance(prefix, str):
            raise InputError('input line {n}: "prefix" must be a string, got {type}', n=n, type=type(prefix).__name__)
        texts.append(check_utf8(obj["src"], f'input line {n}\'s "src"'))
        prefixes.append(prefix if prefix is None else check_utf8(prefix, f'input line {n}\'s "prefix"'))
    return texts, prefixes


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse what makes no sense before the (slow) model load."""
    from scratchformer.errors import ConfigError

    if args.file and args.text:
        raise ConfigError("--file {file} and {n} sentence argument(s): give one or the other", file=args.file,
                          n=len(args.text))


def _check_engine(args: argparse.Namespace, engine: str) -> None:
    """The output and input options only our own decoder has (the decoding options: the Translator checks)."""
    from scratchformer.errors import ConfigError

    if engine == "torch":
        return
    for flag, value, off in (("--format", args.format, "text"), ("--ensemble", args.ensemble, None)):
        if value != off:
            raise ConfigError(f"{flag} {value if isinstance(value, str) else ''}".rstrip() + ": only --engine torch "
                              f"(our own decoder) has this option; the {engine} backend gives the best translation "
                              "as text")


def _expected_tokens(args: argparse.Namespace, run) -> int | None:
    """--file's work for the torch engine's step rule (engines/torch_engine.py: compile the captured step when it
    pays): its lines x the mean source tokens (with </s>) of its first CHUNK lines, as an estimate of the output
    tokens. None for text arguments and stdin: a call whose size is unknown never waits for a compile."""
    if not args.file or args.file == "-" or not Path(args.file).is_file():
        return None
    sample, lines = [], 0
    try:
        with open(args.file, encoding="utf-8", errors="replace") as f:
            for line in f:
                if len(sample) < CHUNK:
                    sample.append(line.rstrip("\n"))
                lines += 1
    except OSError:
        return None  # iter_lines says what is wrong with the file, in one line
    if not lines:
        return None
    return int(lines * sum(len(ids) + 1 for ids in run.src_tok.encode_batch(sample)) / len(sample))


def translate_stream(translate: Callable[[list[str]], list], lines: Iterable[str], write: Callable[[list], None],
                     chunk: int = CHUNK) -> Iterator[tuple[list[str], list]]:
    """Read `lines` CHUNK at a time, translate each chunk and `write` its outputs before reading on; yields each
    (chunk, outputs) after it was written. A 300 MB file is never held whole, and output starts at once."""
    from scratchformer.decoding.pipeline import chunks

    for texts in chunks(lines, chunk):
        outputs = translate(texts)
        write(outputs)
        yield texts, outputs


def cmd_translate(args: argparse.Namespace) -> int:
    from scratchformer.cli.common import set_threads
    from scratchformer.config.decoding_flags import from_args
    from scratchformer.data.language import prefetch
    from scratchformer.engines import Translator
    from scratchformer.runs import load_decoding, load_run

    _check_flags(args)
    if args.show_attention:  # before any work: never a run's own file, nor an existing one without --overwrite
        from scratchformer.runs.folders import check_file

        args.show_attention = str(check_file(Path(args.show_attention), "translate", args.overwrite,
                                             flag="--show-attention"))
    prefetch()  # the language check's model loads while the run does
    set_threads(args.threads)
    if Path(args.run_dir).is_dir():  # before the (slow) model load: the options made (so checked), the engine's
        _check_engine(args, from_args(load_decoding(Path(args.run_dir)), args).engine)  # output options
    run = load_run(args.run_dir, args.weights, ensemble=args.ensemble)
    options = from_args(run.decoding, args)  # messages name the options given as flags, the rest decoding.json's
    expected = _expected_tokens(args, run) if options.engine == "torch" else None
    translator = Translator(run, options, **({"expected_tokens": expected} if expected else {}))
    structured = translator.options.n_best > 1 or translator.options.align or args.format == "jsonl"

    from scratchformer.data.language import warn_wrong_language  # a mostly-CJK input to an en->zh model: one line

    warned = []

    def translate(texts: list[str]) -> list:
        prefix = args.prefix
        if args.input_format == "jsonl":
            texts, prefix = _jsonl_inputs(texts, args.prefix)
        if not warned:  # the first chunk tells
            warned.append(warn_wrong_language(texts, run.train_config.corpus if run.train_config else None))
        return translator.translate(texts, prefix=prefix, return_hyps=structured)

    first: tuple[list[str], list] | None = None
    scores = translator.options.n_best > 1
    for texts, outputs in translate_stream(translate, _inputs(args), lambda outputs: _print(outputs, args, scores),
                                           CHUNK):
        first = first or (texts, outputs)
    if args.show_attention:
        _show_attention(args, run, first)
    return 0


def _show_attention(args: argparse.Namespace, run, first: tuple[list[str], list] | None) -> None:
    """--show-attention: the first sentence's cross-attention heatmap, of its (best) translation."""
    import warnings

    from scratchformer.errors import InputError
    from scratchformer.inspect.attention import plot_cross_attention

    texts, outputs = first or ([], [])
    if args.input_format == "jsonl" and texts:
        texts = _jsonl_inputs(texts[:1], None)[0]
    if not texts or not texts[0].strip():
        raise InputError(N_("--show-attention {flag}: it draws the first sentence, and there is none; give a "
                            "non-empty first sentence") if not texts else
                         N_("--show-attention {flag}: it draws the first sentence, and it is empty; give a non-empty "
                            "first sentence"), flag=args.show_attention)
    output = outputs[0] if isinstance(outputs[0], str) else outputs[0].hyps[0].text
    with warnings.catch_warnings():  # a missing-font warning as one line, like an error
        warnings.showwarning = lambda message, *_: print(f"scratchformer translate: warning: {message}",
                                                         file=sys.stderr)
        path = plot_cross_attention(run, texts[0], output, Path(args.show_attention))
    print(_("cross-attention heatmap: {path}").format(path=path), file=sys.stderr)


def _print(outputs: list, args: argparse.Namespace, scores: bool) -> None:
    """One line per input (text), N per input (--n-best N), or one JSON object per input (--format jsonl)."""
    import json

    for out in outputs:
        if args.format == "jsonl":
            lines = [json.dumps(out.to_dict(), ensure_ascii=False)]
        else:
            lines = out.text_lines(scores=scores) if not isinstance(out, str) else [out]
        for line in lines:
            print(line, flush=True)


def register(sub: argparse._SubParsersAction) -> None:
    from scratchformer.config.decoding_flags import add_decoding_args

    p = sub.add_parser("translate", help="translate text with a trained run")
    p.add_argument("run_dir")
    p.add_argument("text", nargs="*", help="sentences to translate (none or '-' reads stdin, one per line)")
    p.add_argument("--file", help=_("read sentences from FILE ('-' for stdin), one per line; read, translated and "
                                    "printed {n} lines at a time").format(n=CHUNK))
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--weights", help="another safetensors file of the same run (e.g. averaged.safetensors); it "
                   "decodes alone unless --ensemble is given too")
    p.add_argument("--ensemble", nargs="+", metavar="WEIGHTS", help="more safetensors files of the same run, "
                   "decoded with it: the mean of their probabilities (default: decoding.json's ensemble)")
    p.add_argument("--show-attention", metavar="PNG", help="write the first sentence's cross-attention heatmap")
    p.add_argument("--overwrite", action="store_true", help="replace the file --show-attention names if it exists "
                   "(never one of a run's own files)")
    io = p.add_argument_group("input and output")
    io.add_argument("--format", choices=["text", "jsonl"], default="text",
                    help='output: lines of text, or one JSON object per input: {"src": ..., "hyps": [{"text": ..., '
                         '"score": ..., "tokens": [target ids]}]} (default text; jsonl: --engine torch)')
    io.add_argument("--input-format", choices=["text", "jsonl"], default="text",
                    help='input: lines of text, or JSON lines {"src": ..., "prefix": ...} ("prefix" optional: that '
                         "line's forced start, else --prefix) (default text)")
    io.add_argument("--prefix", metavar="TEXT", help="force every translation to start with TEXT (kept in the output; "
                    "--engine torch)")
    add_decoding_args(p.add_argument_group("decoding options (config/decoding.py; default: the run's decoding.json)"),
                      "translate")
    p.set_defaults(func=cmd_translate)

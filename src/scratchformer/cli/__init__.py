"""The command line: `scratchformer <command> ...`. Thin: it parses arguments and wires library parts.

Each command lives in its own module, cli/<command>_cmd.py, with `register(subparsers)`; a ScratchformerError
(or any ValueError raised by our checks, OSError for files) becomes one line on stderr and exit status 2, never
a traceback.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
import warnings

from scratchformer.errors import ScratchformerError, localized
from scratchformer.i18n import LANGUAGES, N_, _, can_show, set_language

# One module per command, in the order `scratchformer --help` lists them.
COMMAND_MODULES = ["params_cmd", "shapes_cmd", "plot_cmd", "train_cmd", "translate_cmd", "evaluate_cmd", "average_cmd",
                   "generate_cmd", "chat_cmd", "consolidate_cmd", "export_cmd", "report_cmd", "serve_cmd", "lab_cmd"]


class Parser(argparse.ArgumentParser):
    """argparse with abbreviations off: `--max-step 5` is an error, not a silent `--max-steps 5`. Subcommands'
    parsers are of the parser's own class (add_subparsers' default), so this holds for every command."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


# argparse's own words (its module calls gettext's `_` on them): routed through our catalog by _argparse_speaks()
ARGPARSE_WORDS = (
    N_("usage: "), N_("positional arguments"), N_("options"), N_("show this help message and exit"),
    N_("show program's version number and exit"), N_("%(prog)s: error: %(message)s\n"),
    N_("argument %(argument_name)s: %(message)s"), N_("the following arguments are required: %s"),
    N_("unrecognized arguments: %s"), N_("invalid choice: %(value)r (choose from %(choices)s)"),
    N_("invalid %(type)s value: %(value)r"), N_("expected one argument"), N_("expected at most one argument"),
    N_("expected at least one argument"), N_("not allowed with argument %s"), N_("one of the arguments %s is required"),
    N_("ambiguous option: %(option)s could match %(matches)s"), N_("ignored explicit argument %r"),
    N_("expected %s argument"), N_("expected %s arguments"),
)


def _argparse_speaks() -> None:
    """argparse looks its words up with its module-level `_` / `ngettext` at call time: point them at our catalog
    (English stays argparse's own text: our catalog falls back to the msgid)."""
    argparse._ = _  # type: ignore[attr-defined]
    argparse.ngettext = lambda one, many, n: _(one if n == 1 else many)  # type: ignore[attr-defined]


def _translate_help(parser: argparse.ArgumentParser) -> None:
    """Every help line, description and group title of `parser` through the catalog, where it is shown. The
    commands write them in English (add_argument(help="...") is found by tests/i18n's extractor); help that a
    command composes (a default filled in) is translated where it is composed."""
    parser.description = _(parser.description) if parser.description else parser.description
    for action in parser._actions:
        if action.help and action.help is not argparse.SUPPRESS:
            action.help = _(action.help)
    for group in parser._action_groups:
        group.title = _(group.title) if group.title else group.title
        group.description = _(group.description) if group.description else group.description


def build_parser() -> argparse.ArgumentParser:
    from scratchformer import __version__

    _argparse_speaks()
    parser = Parser(
        prog="scratchformer",
        description=_("The Transformer, written by hand: train, translate, generate, evaluate and inspect."),
    )
    parser.add_argument("--version", action="version", version=f"scratchformer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"scratchformer.cli.{name}").register(sub)
    # --lang on the top parser and on every command; main() has read it already (the help texts need it first)
    for p in [parser, *sub.choices.values()]:
        p.add_argument("--lang", choices=LANGUAGES, default=argparse.SUPPRESS,
                       help=_("language of the output: zh or en (default: from LANGUAGE / LC_ALL / LANG)"))
    for action in sub._choices_actions:  # the command list; each add_parser(help=...) is in the catalog
        if action.help:
            action.help = _(action.help)
            sub.choices[action.dest].description = sub.choices[action.dest].description or action.help
    for p in [parser, *sub.choices.values()]:
        _translate_help(p)
    return parser


def _language_in(argv: list[str]) -> str | None:
    """The value of --lang zh / --lang=zh in argv (None: none given, or not one argparse would accept)."""
    for i, arg in enumerate(argv):
        value = argv[i + 1] if arg == "--lang" and i + 1 < len(argv) else arg.partition("=")[2]
        if (arg == "--lang" or arg.startswith("--lang=")) and value in LANGUAGES:
            return value
    return None


def main(argv: list[str] | None = None) -> int:
    if (sys.argv[1:] if argv is None else argv) == ["--version"]:  # before any parser: no command module loaded
        from scratchformer import __version__

        print(f"scratchformer {__version__}")
        raise SystemExit(0)
    lang = set_language(_language_in(sys.argv[1:] if argv is None else argv))
    if not can_show(sys.stdout, lang):  # Chinese help on an ascii / latin-1 stdout: English, said once on stderr
        set_language("en")
        print(f"scratchformer: note: stdout's encoding ({sys.stdout.encoding}) cannot show Chinese: using English "
              "(set PYTHONIOENCODING=utf-8 or a UTF-8 locale for Chinese)", file=sys.stderr)
    parser = build_parser()
    _refuse_retired(parser, sys.argv[1:] if argv is None else argv)  # before argparse asks for a required --out
    args, extra = parser.parse_known_args(argv)
    # argparse cannot mix a `nargs="*"` positional with options (`translate RUN --beam 4 "a" "b"`): the
    # sentences after the options arrive as extras, and belong to that positional.
    lists = [n for n in ("text", "prompts", "prompt", "overrides") if isinstance(getattr(args, n, None), list)]
    free = lists[0] if lists else None
    if extra and free and not any(e.startswith("-") and len(e) > 1 for e in extra):
        setattr(args, free, getattr(args, free) + extra)
    elif extra:
        _unrecognized(parser, args, extra)
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning(args.command)  # restored on exit by catch_warnings
        return _run(args)


def _refuse_retired(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Exit 2 with one line when argv gives its command a flag the command retired (its `retired_flags` default): the
    flag named with its replacement, `{value}` in it the value given (`--warmup 400` -> use warmup=400)."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    name = next((a for a in argv if a in commands), None)  # `--lang zh train ...` too
    sub = commands.get(name) if name is not None else None
    retired = (sub.get_default("retired_flags") or {}) if sub is not None else {}
    first = next((a.split("=", 1)[0] for a in argv if a.split("=", 1)[0] in retired), None)
    if sub is None or first is None:
        return
    replacement = _(retired[first]).replace("{value}", _given_value(first, argv))
    message = _("{flag} is gone: use {replacement}").format(flag=first, replacement=replacement)
    sub.exit(2, _("%(prog)s: error: %(message)s\n") % {"prog": sub.prog, "message": message})


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> None:
    """Exit 2 with one line from the command: the arguments it does not take, and the flag the first one resembles
    (`--max-step` -> did you mean --max-steps?); abbreviations stay refused (a flag it retired was refused before
    parsing: _refuse_retired)."""
    import difflib

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[args.command]
    first = next((e.split("=", 1)[0] for e in extra if e.startswith("--")), "")
    flags = [s for action in sub._actions for s in action.option_strings if s.startswith("--")]
    close = difflib.get_close_matches(first, flags, n=1, cutoff=0.75)
    hint = _(" (did you mean {flag}?)").format(flag=close[0]) if close else ""
    sub.exit(2, _("%(prog)s: error: %(message)s\n") % {
        "prog": sub.prog, "message": _("unrecognized arguments: %s") % " ".join(extra) + hint})


def _given_value(flag: str, argv: list[str]) -> str:
    """The value given with `flag` in argv (`--warmup 400`, `--warmup=400`), or VALUE when none follows it."""
    for i, arg in enumerate(argv):
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
        if arg == flag and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            return argv[i + 1]
    return "VALUE"


def _run(args: argparse.Namespace) -> int:
    """The command, with every failure we can explain turned into one line on stderr and exit status 2."""
    def fail(message: str) -> int:
        print(_("scratchformer {command}: error: {message}").format(command=args.command, message=message),
              file=sys.stderr)
        return 2

    out_of_memory = _("out of memory: lower --batch-size / --beam (or --max-tokens), or use a smaller model")

    try:
        if sys.stdout is None:  # `1>&-`: print() would drop every line and report success
            raise OSError(errno.EBADF, "stdout is closed")
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a full disk or a closed pipe shows here for output still buffered
        return code
    except ScratchformerError as e:
        return fail(localized(e, _))
    except (FileNotFoundError, PermissionError, IsADirectoryError) as e:
        return fail(str(e))
    except UnicodeDecodeError as e:  # a reader we did not wrap: still one line
        return fail(_("input is not valid UTF-8 ({reason} at byte {start}); convert it with iconv").format(
            reason=e.reason, start=e.start))
    except ValueError as e:  # our checks raise ValueError subclasses with one-line messages
        return fail(localized(e, _))
    except BrokenPipeError:  # `scratchformer shapes | head`
        _silence_stdout()
        sys.stderr.close()
        return 0
    except MemoryError:
        return fail(out_of_memory)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EBADF, errno.EIO) and _is_stdout_error(e):
            _silence_stdout()
            return fail(_("cannot write the output: {reason}").format(reason=e.strerror or e) + (
                "" if e.errno != errno.EBADF else _(" (run it with stdout open, e.g. > FILE)")))
        where = f"{e.filename}: " if e.filename else ""
        return fail(f"{where}{e.strerror or e}")
    except RuntimeError as e:  # torch reports an allocation it could not make as a RuntimeError
        if type(e).__name__ == "OutOfMemoryError" or "can't allocate memory" in str(e) or "out of memory" in str(e):
            return fail(out_of_memory)
        raise
    except KeyboardInterrupt:
        print(_("scratchformer {command}: interrupted").format(command=args.command), file=sys.stderr)
        return 130


def _is_stdout_error(e: OSError) -> bool:
    """An error of writing our output (no file name; a full disk, a closed or broken stdout), not of a file."""
    return e.filename is None


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so that the interpreter's last flush at exit does not fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno() if sys.stdout is not None else 1)
    except (OSError, ValueError, AttributeError):  # no fd 1 at all (in-process tests with a StringIO stdout)
        pass


def _one_line_warning(command: str):
    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = localized(message, _) if isinstance(message, BaseException) else _(str(message))
        print(_("scratchformer {command}: warning: {message}").format(command=command, message=text),
              file=sys.stderr if file is None else file, flush=True)

    return show

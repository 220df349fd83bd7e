"""The command line: `scratchformer <command> ...`. Thin: it parses arguments and wires library parts.

Each command lives in its own module with `register(subparsers)`; a ScratchformerError (or any ValueError
raised by our checks, OSError for files) becomes one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from scratchformer.errors import ScratchformerError

COMMAND_MODULES = ["inspect_cmds", "train_cmd", "translate_cmd", "evaluate_cmd", "generate_cmd", "distributed_cmd"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scratchformer",
        description="The Transformer, written by hand: train, translate, generate, evaluate and inspect.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"scratchformer.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"scratchformer.cli.{name}":
                continue  # command not built yet
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse cannot mix a `nargs="*"` positional with options (`translate RUN --beam 4 "a" "b"`): the
    # sentences after the options arrive as extras, and belong to that positional.
    lists = [n for n in ("text", "prompts", "prompt", "overrides") if isinstance(getattr(args, n, None), list)]
    free = lists[0] if lists else None
    if extra and free and not any(e.startswith("-") and len(e) > 1 for e in extra):
        setattr(args, free, getattr(args, free) + extra)
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.func(args) or 0)
    except (ScratchformerError, FileNotFoundError, PermissionError, IsADirectoryError) as e:
        print(f"scratchformer {args.command}: error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # our checks raise ValueError subclasses with one-line messages
        print(f"scratchformer {args.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `scratchformer shapes | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"scratchformer {args.command}: interrupted", file=sys.stderr)
        return 130

"""`scratchformer generate RUN_DIR|MODEL "prompt" ...`: continue prompts with a language-model (decoder-only) run,
or a pretrained Llama-family model (a .gguf file or a Hugging Face folder, with its own tokenizer).

How prompts are read, sampled and printed: DESCRIPTION below (what `generate --help` says).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable

from scratchformer.cli.common import SetKey, add_set_arg
from scratchformer.config.decoding import DEFAULT_MAX_NEW
from scratchformer.i18n import N_, _

REPLACEMENT = "\ufffd"  # what a byte-level tokenizer decodes half a UTF-8 character to


def _prompts(args: argparse.Namespace) -> list[str]:
    from scratchformer.cli.common import check_text_args, read_lines

    if args.prompt and args.prompt != ["-"]:
        return check_text_args(list(args.prompt))
    return read_lines("-")


class Streamer:
    """on_token callback: decode the growing ids and print only the new suffix, flushing at once.

    A trailing U+FFFD (a character split over byte tokens, still incomplete) is held back until its
    bytes are complete; `finish` prints whatever is left and ends the line."""

    def __init__(self, decode: Callable[[list[int]], str], prompt_ids: list[int], out=None) -> None:
        self.decode, self.ids, self.out = decode, list(prompt_ids), out or sys.stdout
        self.shown = decode(self.ids)
        self.out.write(self.shown)
        self.out.flush()

    def __call__(self, row: int, token: int) -> None:
        self.ids.append(token)
        self._show(self.decode(self.ids).rstrip(REPLACEMENT))

    def _show(self, text: str) -> None:
        if text.startswith(self.shown) and len(text) > len(self.shown):
            self.out.write(text[len(self.shown):])
            self.out.flush()
            self.shown = text

    def finish(self) -> str:
        text = self.decode(self.ids)
        self._show(text)
        self.out.write("\n")
        self.out.flush()
        return text


def _warn_one_line(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"scratchformer generate: warning: {message}", file=sys.stderr, flush=True)


def check_sampling_options(args: argparse.Namespace) -> None:
    """The options add_sampling_args adds, checked (one-line errors) before a slow model load; sets the threads."""
    from scratchformer.cli.common import apply_sets, set_threads
    from scratchformer.decoding.sampling import check_sampling_args
    from scratchformer.errors import ConfigError

    apply_sets(args)  # --set temperature=0.5 ...
    check_sampling_args(args.temperature, args.top_k, args.top_p)
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        raise ConfigError(N_("--max-new-tokens must be >= 1, got {value}"), value=args.max_new_tokens)
    if args.seed is not None and not 0 <= args.seed < 2**64:  # what torch.Generator.manual_seed takes
        raise ConfigError(N_("seed={seed}: give a number in [0, 2**64)"), seed=args.seed)
    set_threads(args.threads)  # checked (and set) before the load, as translate does


def cmd_generate(args: argparse.Namespace) -> int:
    from scratchformer.data.tokenizers import BOS_ID, EOS_ID
    from scratchformer.decoding.sampling import Sampling, fit_prompts, sample
    from scratchformer.errors import ConfigError
    from scratchformer.interop.pretrained import DTYPES, is_pretrained, load_lm
    from scratchformer.runs import load_run

    check_sampling_options(args)  # before the (slow) model load
    if args.batch_size < 1:
        raise ConfigError(N_("batch_size must be >= 1, got {value}"), value=args.batch_size)
    if is_pretrained(args.run_dir):  # a .gguf file or a Hugging Face folder: its own tokenizer, BOS and EOS
        lm = load_lm(args.run_dir, DTYPES[args.dtype])
        start = [lm.bos_id if lm.bos_id is not None else lm.eos_id]  # what an empty prompt starts from
        model, decode, eos = lm.model, lm.decode, lm.eos_id
        to_ids = lambda text: lm.encode(text) or start  # noqa: E731
    else:
        run = load_run(args.run_dir, args.weights)
        if run.model_config.arch != "decoder":
            raise ConfigError(N_("{run_dir} holds a {arch} model: generate needs a language-model (decoder-only) "
                                 "run, e.g. `scratchformer train --recipe lm-demo`"), run_dir=args.run_dir,
                              arch=run.model_config.arch)
        model, decode, eos = run.model, run.tgt_tok.decode, EOS_ID
        to_ids = lambda text: [BOS_ID, *run.tgt_tok.encode(text)]  # noqa: E731
    texts = _prompts(args)
    if not texts:
        raise ConfigError(N_("no prompt: give one as an argument or on stdin"))
    prompts = [to_ids(t) for t in texts]
    max_new = fit_prompts(prompts, model.config.max_positions, args.max_new_tokens, args.truncate,  # before printing
                          flags={"max_new": "--max-new-tokens {}", "truncate": "--set truncate=left"})
    spec = Sampling(max_new_tokens=max_new, temperature=args.temperature, top_k=args.top_k,
                    top_p=args.top_p, seed=args.seed, eos=eos, truncate=args.truncate)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _warn_one_line  # restored by catch_warnings
        if len(prompts) == 1:
            streamer = Streamer(decode, prompts[0])
            try:
                sample(model, prompts, spec, on_token=streamer)
            finally:
                streamer.finish()
            return 0
        for start in range(0, len(prompts), args.batch_size):
            chunk = prompts[start : start + args.batch_size]
            for prompt, new in zip(chunk, sample(model, chunk, spec)):
                print(decode(prompt + new), flush=True)
    return 0


def _none_or(kind):
    def parse(text: str):
        return None if text.lower() in ("none", "off") else kind(text)

    parse.__name__ = kind.__name__
    return parse


DESCRIPTION = N_("One prompt is streamed: its text, then each new piece as soon as its token is chosen. Several "
                 "prompts are sampled as one left-padded batch and printed one line each (prompt + continuation) when "
                 "done. No prompt, or \"-\", reads prompts from stdin, one per line. An empty prompt (\"\") samples "
                 "from <s> alone.")


def _choice(*names: str):
    def parse(text: str) -> str:
        if text not in names:
            raise ValueError(text)
        return text

    parse.__name__ = " or ".join(names)
    return parse


def _int(text: str) -> int:
    return int(text)


def _float(text: str) -> float:
    return float(text)


_int.__name__, _float.__name__ = "a whole number", "a number"
# The sampling settings of `--set KEY=VALUE` (generate and chat); generate adds its own below.
SAMPLING_KEYS = [
    SetKey("temperature", _float, 0.8, N_("divide the logits by T before sampling; T <= 0 means greedy decoding "
                                          "(argmax; top_k and top_p then have no effect)")),
    SetKey("top_k", _none_or(int), None, N_("sample among the K most likely tokens (none: off)")),
    SetKey("top_p", _none_or(float), 0.95, N_("nucleus sampling: the smallest set of tokens holding probability P, "
                                              "P in (0, 1] (1: off)")),
    SetKey("seed", _none_or(int), None, N_("seed of the sampling RNG (same seed, same text; none: random)")),
]
GENERATE_KEYS = [
    *SAMPLING_KEYS,
    SetKey("truncate", _choice("left", "error"), "left", N_("a prompt longer than the model's max_positions minus "
                                                            "--max-new-tokens: cut its start, with a warning (left), "
                                                            "or refuse (error)")),
    SetKey("batch_size", _int, 32, N_("prompts sampled together")),
    SetKey("weights", str, None, N_("another safetensors file of the run (e.g. averaged.safetensors)")),
]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="continue text with a language-model run (sampling, streamed)",
                       description=DESCRIPTION)
    p.add_argument("run_dir", metavar="RUN_OR_MODEL",
                   help="a language-model run directory, or a pretrained model: a .gguf file or a Hugging Face "
                        "Llama folder (config.json, weights, tokenizer.json)")
    p.add_argument("prompt", nargs="*", help="prompts (none or '-' reads stdin, one per line)")
    add_sampling_args(p, GENERATE_KEYS)
    p.set_defaults(func=cmd_generate)


def add_sampling_args(p: argparse.ArgumentParser, keys: list[SetKey]) -> None:
    """The sampling, thread and dtype options `generate` and `chat` share; `keys` are those of its --set."""
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help=_("most tokens added to each prompt, which stops earlier at </s> (default {n}, fewer if the "
                          "model's max_positions leaves no room)").format(n=DEFAULT_MAX_NEW))
    add_set_arg(p, keys)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="weights of a pretrained model (.gguf / folder): float32 (default) or bfloat16")

"""`scratchformer chat MODEL`: talk to a pretrained instruct model (a .gguf file or a Hugging Face Llama folder).

How a conversation goes: DESCRIPTION below (what `chat --help` says).
"""

from __future__ import annotations

import argparse
import itertools
import sys

from scratchformer.cli.generate_cmd import SAMPLING_KEYS, Streamer, add_sampling_args, check_sampling_options
from scratchformer.i18n import N_


def cmd_chat(args: argparse.Namespace) -> int:
    from scratchformer.decoding.sampling import Sampling, fit_prompts, sample
    from scratchformer.errors import ConfigError
    from scratchformer.interop.pretrained import DTYPES, is_pretrained, load_lm

    check_sampling_options(args)
    if not is_pretrained(args.model):
        raise ConfigError(N_("{model} is not a pretrained model: chat reads a .gguf file or a Hugging Face folder "
                             "with config.json and tokenizer.json"), model=args.model)
    lm = load_lm(args.model, DTYPES[args.dtype])
    messages = [{"role": "system", "content": args.system}] if args.system else []
    lm.chat_prompt(messages + [{"role": "user", "content": ""}])  # no template: a one-line error before any turn
    interactive = sys.stdin is not None and sys.stdin.isatty()
    for turn in itertools.count(1):
        if interactive:
            print("> ", end="", flush=True)
        line = _read_turn(turn)
        if not line.strip():
            return 0
        messages.append({"role": "user", "content": line.strip()})
        ids = lm.encode(lm.chat_prompt(messages))
        max_new = fit_prompts([ids], lm.model.config.max_positions, args.max_new_tokens or 256, "error",
                              flags={"max_new": "--max-new-tokens {}", "truncate": "a shorter conversation"})
        streamer = Streamer(lm.decode, [], sys.stdout)
        try:
            sample(lm.model, [ids], Sampling(max_new_tokens=max_new, temperature=args.temperature, top_k=args.top_k,
                                             top_p=args.top_p, seed=args.seed, eos=lm.eos_id), on_token=streamer)
        finally:
            reply = streamer.finish()
        messages.append({"role": "assistant", "content": reply})
    return 0  # not reached: the loop ends at an empty line


def _read_turn(n: int) -> str:
    """Line `n` of stdin ("" at its end), read as bytes: invalid UTF-8 is the one-line InputError `generate` gives
    for it (data/corpus.py's decode_lines, told the line's number), never a TypeError from the tokenizer."""
    from scratchformer.data.corpus import decode_lines
    from scratchformer.errors import InputError

    stream = sys.stdin
    if stream is None:  # the shell closed it (`0<&-`)
        return ""
    raw = stream.buffer.readline() if hasattr(stream, "buffer") else stream.readline().encode("utf-8", "surrogatepass")
    lines = decode_lines(b"\n" * (n - 1) + raw, "stdin", InputError)  # the newlines only number the line
    return lines[-1] if raw else ""


DESCRIPTION = N_("Each line on stdin is one user turn; the whole conversation goes through the model's own chat "
                 "template, and the reply is streamed as it is sampled on our KV cache. An empty line or end of input "
                 "ends the chat.")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chat", help="chat with a pretrained instruct model (.gguf or Hugging Face folder), streamed",
                       description=DESCRIPTION)
    p.add_argument("model", help="a .gguf file or a Hugging Face Llama folder with its tokenizer")
    p.add_argument("--system", default=None, help="a system message first (default: the template's own, if any)")
    add_sampling_args(p, SAMPLING_KEYS)
    p.set_defaults(func=cmd_chat)

"""`scratchformer chat MODEL`: talk to a pretrained instruct model (a .gguf file or a Hugging Face Llama folder).

Each line on stdin is one user turn; the whole conversation goes through the model's own chat template, and the
reply is streamed as it is sampled on our KV cache. An empty line or end of input ends the chat.
"""

from __future__ import annotations

import argparse
import sys

from scratchformer.cli.generate_cmd import Streamer, add_sampling_args, check_sampling_options


def cmd_chat(args: argparse.Namespace) -> int:
    from scratchformer.decoding.sampling import fit_prompts, sample
    from scratchformer.errors import ConfigError
    from scratchformer.interop.pretrained import DTYPES, is_pretrained, load_lm

    check_sampling_options(args)
    if not is_pretrained(args.model):
        raise ConfigError(f"{args.model} is not a pretrained model: chat reads a .gguf file or a Hugging Face "
                          "folder with config.json and tokenizer.json")
    lm = load_lm(args.model, DTYPES[args.dtype])
    messages = [{"role": "system", "content": args.system}] if args.system else []
    lm.chat_prompt(messages + [{"role": "user", "content": ""}])  # no template: a one-line error before any turn
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            print("> ", end="", flush=True)
        line = sys.stdin.readline()
        if not line.strip():
            return 0
        messages.append({"role": "user", "content": line.strip()})
        ids = lm.encode(lm.chat_prompt(messages))
        max_new = fit_prompts([ids], lm.model.config.max_len, args.max_new_tokens or 256, "error",
                              flags={"max_new": "--max-new-tokens {}", "truncate": "a shorter conversation"})
        streamer = Streamer(lm.decode, [], sys.stdout)
        try:
            sample(lm.model, [ids], max_new_tokens=max_new, temperature=args.temperature, top_k=args.top_k,
                   top_p=args.top_p, seed=args.seed, eos=lm.eos_id, on_token=streamer)
        finally:
            reply = streamer.finish()
        messages.append({"role": "assistant", "content": reply})


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chat", help="chat with a pretrained instruct model (.gguf or Hugging Face folder), streamed",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("model", help="a .gguf file or a Hugging Face Llama folder with its tokenizer")
    p.add_argument("--system", default=None, help="a system message first (default: the template's own, if any)")
    add_sampling_args(p)
    p.set_defaults(func=cmd_chat)

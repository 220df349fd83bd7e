"""Text in, text out: tokenize, batch by length, decode (greedy or beam), restore order, detokenize.

    translate_texts(model, src_tok, tgt_tok, ["Hello."], beam=4) -> ["你好。"]

Sources are encoded as in training (`data/batching.py:encode_pairs`): ``encode(s) + [EOS]``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from scratchformer.config import available_memory, human_bytes
from scratchformer.data.tokenizers import EOS_ID, Tokenizer
from scratchformer.decoding.beam import beam_search
from scratchformer.decoding.common import PAPER_EXTRA_LEN
from scratchformer.decoding.greedy import greedy_decode
from scratchformer.errors import ConfigError, InputError
from scratchformer.model.transformer import EncoderDecoder

MAX_ALPHA = 10.0  # GNMT tuned alpha in [0.6, 1]; ((5 + 512) / 6) ** 10 is still a float


def _named(name: str, value: object, cli: bool) -> str:
    """How a message names an option: `--max-len 7` for the command line, `max_len=7` for the API."""
    return f"--{name.replace('_', '-')} {value}" if cli else f"{name}={value}"


def search_bytes(model: EncoderDecoder, rows: int, steps: int) -> int:
    """Rough bytes a search of `rows` decoding rows (sentences x beams) over `steps` tokens holds at its peak: the
    self-attention KV cache (fp32, every decoder layer) and three (rows, V) score tensors per step."""
    c = model.config
    kv = c.n_decoder_layers * steps * c.n_heads * (c.head_dim_k + c.head_dim_v) * 4
    return rows * (kv + 3 * c.tgt_vocab_size * 4 + steps * 8)


def check_translate_options(model: EncoderDecoder, beam: int, alpha: float, batch_size: int,
                            max_tokens: int | None, max_len: int | None, sentences: int | None = None,
                            longest: int | None = None, cli: bool = False) -> None:
    """One-line errors for decoding options that cannot work, before any decoding: a model that does not
    translate, sizes < 1, a non-finite or negative alpha, a max_len beyond the model's positions, and a beam
    wider than the vocabulary or than the machine's memory. `sentences` / `longest` (source tokens) tighten the
    memory estimate when known; `cli` names the options as flags."""
    arch = getattr(getattr(model, "config", None), "arch", None)
    if arch != "encoder-decoder":
        raise InputError(f"translation needs an encoder-decoder model, got a {arch or type(model).__name__} one")
    for name, value in (("beam", beam), ("batch_size", batch_size)):
        if value < 1:
            raise ConfigError(f"{_named(name, value, cli)}: must be >= 1")
    for name, value in (("max_tokens", max_tokens), ("max_len", max_len)):
        if value is not None and value < 1:
            raise ConfigError(f"{_named(name, value, cli)}: must be >= 1 (or left unset)")
    if not 0 <= alpha <= MAX_ALPHA:  # NaN fails too; a huge alpha overflows ((5 + |Y|) / 6) ** alpha
        raise ConfigError(f"{_named('alpha', alpha, cli)}: the length penalty's exponent must be in [0, {MAX_ALPHA}] "
                          "(0 = off; the paper uses 0.6)")
    cap = model.config.max_len
    if max_len is not None and max_len > cap:
        raise ConfigError(f"{_named('max_len', max_len, cli)}: the model's positions end at max_len={cap}; give at "
                          f"most {cap} output tokens (unset: source length + {PAPER_EXTRA_LEN})")
    vocab = model.config.tgt_vocab_size
    if beam > vocab:
        raise ConfigError(f"{_named('beam', beam, cli)}: wider than the {vocab}-token target vocabulary; beams of "
                          "4-12 are usual")
    steps = min(cap, max_len or ((longest or cap) + PAPER_EXTRA_LEN))
    rows = min(batch_size, sentences if sentences is not None else batch_size) * beam
    need, have = search_bytes(model, rows, steps), available_memory()
    if have is not None and need > have:
        raise ConfigError(f"{_named('beam', beam, cli)} with {_named('batch_size', batch_size, cli)}: the search "
                          f"would need about {human_bytes(need)}; this machine has {human_bytes(have)} available: "
                          "lower the beam or the batch size")


def translate_texts(
    model: EncoderDecoder,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    texts: Sequence[str],
    beam: int = 1,
    alpha: float = 0.6,
    batch_size: int = 32,
    max_tokens: int | None = None,
    max_len: int | None = None,
) -> list[str]:
    """Translate `texts`, in order. beam=1 is greedy. Batches hold at most `batch_size` sentences and, if
    given, at most `max_tokens` padded source tokens. max_len: most output tokens per sentence (None: the
    paper's src_len + 50). Empty lines give empty outputs; sources longer than the model's max_len are cut
    (with one warning)."""
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
        raise InputError(f"texts must be a list of strings (one sentence each), got {type(texts).__name__}"
                         + ("" if isinstance(texts, str) or not isinstance(texts, Sequence) else " holding "
                            + ", ".join(sorted({type(t).__name__ for t in texts if not isinstance(t, str)}))))
    check_translate_options(model, beam, alpha, batch_size, max_tokens, max_len)
    limit = model.config.max_len
    ids = src_tok.encode_batch(texts)
    long = sum(len(s) + 1 > limit for s in ids)
    if long:
        warnings.warn(f"cut {long} source sentence(s) to the model's max_len={limit} tokens", stacklevel=2)
    srcs = [[*s[: limit - 1], EOS_ID] for s in ids]
    todo = sorted((i for i, t in enumerate(texts) if t.strip()), key=lambda i: -len(srcs[i]))  # longest first
    if todo and beam > 1:  # the memory of this search, now that its rows and lengths are known
        check_translate_options(model, beam, alpha, batch_size, max_tokens, max_len, len(todo), len(srcs[todo[0]]))
    outputs = [""] * len(texts)
    for batch in _batches(todo, [len(s) for s in srcs], batch_size, max_tokens):
        src = [srcs[i] for i in batch]
        if beam == 1:
            hyps = greedy_decode(model, src, max_len=max_len)
        else:
            hyps = [h[0].tokens for h in beam_search(model, src, beam_size=beam, alpha=alpha, max_len=max_len)]
        for i, tokens in zip(batch, hyps):
            outputs[i] = tgt_tok.decode(tokens)
    return outputs


def _batches(order: list[int], lengths: list[int], batch_size: int, max_tokens: int | None) -> list[list[int]]:
    """Cut `order` (longest first) into batches of <= batch_size sentences and <= max_tokens padded tokens."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = lengths[current[0]] if current else lengths[i]  # sorted: the first one is the longest
        too_many = max_tokens is not None and (len(current) + 1) * longest > max_tokens
        if current and (len(current) == batch_size or too_many):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches

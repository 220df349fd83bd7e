"""The steps of every translation, whatever engine searches: engines/translator.py's Translator runs them.

    texts -> pre-processors (sentence splitting) -> pieces -> ids (encode, cut to max_len, </s>)
          -> batches (longest first; <= batch_size sentences, <= max_tokens padded source tokens)
          -> the backend's search -> detokenise -> post-processors (copy repair) -> join -> outputs

A backend is anything with `SUPPORTS` (the optional options it honours) and `decode_batch(srcs, options, prefixes,
structured)`: EOS-terminated source id lists in, per source a list of Hyps (text left empty: detokenising is done
here) out. Sources are encoded as in training (data/batching.py: encode_pairs): ``encode(s) + [EOS]``. Empty lines,
and lines of only invisible characters (a NUL, RTL marks, a ZWJ: sentences.blank), give empty outputs; sources
longer than the model's max_len are cut (one warning).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from scratchformer.config.budget import output_budget
from scratchformer.config.decoding import DecodingOptions
from scratchformer.data.tokenizers import EOS_ID, UNK_ID, Tokenizer
from scratchformer.decoding.copies import repair_copies
from scratchformer.decoding.results import Hyp, Translation, join_parts
from scratchformer.decoding.sentences import blank, join_translations, split_sentences
from scratchformer.errors import N_, ConfigError, InputError, ScratchformerWarning
from scratchformer.i18n import _


class Backend(Protocol):
    """An engine's search (engines/: torch_engine, ctranslate2, onnx)."""

    SUPPORTS: frozenset[str]
    models: int  # models decoded together (an ensemble: more than one), each with its own KV cache

    def decode_batch(self, srcs: list[list[int]], options: DecodingOptions, prefixes: list[list[int]] | None,
                     structured: bool) -> list[list[Hyp]]: ...


def check_texts(texts: object) -> list[str]:
    """`texts` as a list, or a one-line InputError when it is not a sequence of strings."""
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
        raise InputError(f"texts must be a list of strings (one sentence each), got {type(texts).__name__}"
                         + ("" if isinstance(texts, str) or not isinstance(texts, Sequence) else " holding "
                            + ", ".join(sorted({type(t).__name__ for t in texts if not isinstance(t, str)}))))
    return list(texts)


# -- pre- and post-processors, by name (DecodingOptions.text_level) ----------------------------------------------

def pieces_of(texts: Sequence[str], split: bool) -> tuple[list[int], list[str]]:
    """The pre-processor `split_sentences`: the sentences to translate and the text each belongs to (a text of one
    sentence, or a blank one, stays one piece); without `split` each text is one piece."""
    if not split:
        return list(range(len(texts))), list(texts)
    owner, pieces = [], []
    for i, text in enumerate(texts):
        parts = split_sentences(text) or [text]
        owner += [i] * len(parts)
        pieces += parts
    return owner, pieces


def post_process(options: DecodingOptions, source: str, output: str) -> str:
    """The post-processor `repair_copies`, when on: `output`'s miscopied spans put back from its `source`."""
    return repair_copies(source, output) if options.repair_copies else output


# -- the token-budget batcher ----------------------------------------------------------------------------------

def batches(order: list[int], lengths: list[int], batch_size: int, max_tokens: int | None) -> list[list[int]]:
    """Cut `order` (longest first) into batches of <= batch_size sentences and <= max_tokens padded source tokens
    (rows x the longest; a single sentence longer than max_tokens is a batch of its own)."""
    out: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = lengths[current[0]] if current else lengths[i]  # sorted: the first one is the longest
        too_many = max_tokens is not None and (len(current) + 1) * longest > max_tokens
        if current and (len(current) == batch_size or too_many):
            out.append(current)
            current = []
        current.append(i)
    if current:
        out.append(current)
    return out


def chunks(items: Iterable[str], size: int) -> Iterator[list[str]]:
    """`items` in lists of `size` (the last one shorter), read lazily: a stream of lines is never held whole."""
    chunk: list[str] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# -- the steps in order ----------------------------------------------------------------------------------------

def prefix_ids(tgt_tok: Tokenizer, prefix: str | Sequence[str | None] | None, n: int, most: int) -> list[list[int]]:
    """Forced target ids for each of `n` texts; one-line errors for a prefix of the wrong kind, one with text the
    target vocabulary lacks, and one of more than `most` tokens."""
    if prefix is None or isinstance(prefix, str):
        prefix = [prefix] * n
    elif not isinstance(prefix, Sequence) or len(prefix) != n:
        raise InputError(N_("prefix must be a string or one per text (None for none), got {got} for {n} text(s)"),
                         got=len(prefix) if isinstance(prefix, Sequence) else type(prefix).__name__, n=n)
    out = []
    for p in prefix:
        if p is not None and not isinstance(p, str):
            raise InputError(N_("prefix must be a string or None, got {kind}"), kind=type(p).__name__)
        ids = tgt_tok.encode(p) if p else []
        if UNK_ID in ids:
            raise InputError(N_("prefix {prefix!r} holds text the target vocabulary lacks; it would be forced as "
                                "<unk> and lost from the output"), prefix=p)
        if len(ids) > most:
            raise ConfigError(N_("prefix {prefix!r}: {n} target tokens, more than the {most} an output may have "
                                 "(max_len)"), prefix=p, n=len(ids), most=most)
        out.append(ids)
    return out


def run_pipeline(backend: Backend, tokenizers: tuple[Tokenizer, Tokenizer], limit: int, texts: list[str],
                 options: DecodingOptions, prefix: str | Sequence[str | None] | None = None,
                 structured: bool = False, progress: bool = False) -> list[str] | list[Translation]:
    """`texts` translated, in order, through every step above (tokenizers: source and target; `limit`: the model's
    positions). Returns strings, or with `structured` one Translation per text (results.py; n_best hypotheses, empty
    ones of score 0 for an empty text; with align the text is left as decoded, since alignments index the model's
    tokens)."""
    src_tok, tgt_tok = tokenizers
    forced = prefix_ids(tgt_tok, prefix, len(texts), output_budget(limit, options.max_output_len, limit))
    owner, pieces = pieces_of(texts, options.split_sentences)  # sentence i belongs to texts[owner[i]]
    ids = src_tok.encode_batch(pieces)
    long = sum(len(s) + 1 > limit for s in ids)
    if long:
        warnings.warn(ScratchformerWarning(N_("cut {long} source sentence(s) to the model's max_len={limit} tokens"),
                                           long=long, limit=limit), stacklevel=3)
    srcs = [[*s[: limit - 1], EOS_ID] for s in ids]
    firsts = {o: i for i, o in reversed(list(enumerate(owner)))}  # a text's prefix starts its first sentence
    prefixes = [forced[o] if firsts[o] == i else [] for i, o in enumerate(owner)]
    todo = sorted((i for i, t in enumerate(pieces) if not blank(t)), key=lambda i: -len(srcs[i]))  # longest first
    done: list[list[Hyp]] = [[] for _ in pieces]
    left = [0] * len(texts)  # sentences still to translate, per text: the bar counts texts, as results do
    for i in todo:
        left[owner[i]] += 1
    bar = _bar(len(texts) - left.count(0), progress)  # the texts with words in them
    for batch in batches(todo, [len(s) for s in srcs], options.batch_size, options.max_tokens):
        pre = [prefixes[i] for i in batch]
        found = backend.decode_batch([srcs[i] for i in batch], options, pre if any(pre) else None, structured)
        for i, hyps in zip(batch, found, strict=True):
            repair = options.repair_copies and not options.align
            done[i] = [Hyp(post_process(options, pieces[i], tgt_tok.decode(h.tokens)) if repair
                           else tgt_tok.decode(h.tokens), h.score, h.tokens, h.alignment) for h in hyps]
        for i in batch:
            left[owner[i]] -= 1
        bar.update(len({owner[i] for i in batch if left[owner[i]] == 0}))  # the texts this batch finished
    bar.close()
    by_text: list[list[int]] = [[] for _ in texts]
    for i, o in enumerate(owner):
        by_text[o].append(i)
    if not structured:
        return [join_translations([done[i][0].text if done[i] else "" for i in parts]) for parts in by_text]
    empty = [Hyp("", 0.0, [], [] if options.align else None) for _ in range(options.n_best)]
    return [Translation(text, join_parts([done[i] for i in parts], [len(srcs[i]) - 1 for i in parts])
                        if not blank(text) else empty) for text, parts in zip(texts, by_text)]


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(total: int, progress: bool):
    """A tqdm bar with an ETA on stderr, counting texts (a split paragraph once), when asked for (evaluate); else
    nothing."""
    if not progress or not total:
        return _NoBar()
    from tqdm import tqdm  # late: only a run that shows progress needs it

    return tqdm(total=total, unit=_("sent"), desc=_("translating"), file=sys.stderr, dynamic_ncols=True)

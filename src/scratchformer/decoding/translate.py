"""Text in, text out: tokenize, batch by length, decode (greedy or beam), restore order, detokenize.

    translate_texts(model, src_tok, tgt_tok, ["Hello."], beam=4) -> ["你好。"]
    translate_texts(..., n_best=4) / (..., align=True) / (..., return_hyps=True) -> [Translation, ...] (results.py)

Sources are encoded as in training (`data/batching.py:encode_pairs`): ``encode(s) + [EOS]``.
Options translators ask for: n-best lists with scores, repetition rules and a forced target prefix
(constraints.py), sentence splitting of paragraphs (sentences.py), miscopied names put back (copies.py), word
alignments (alignment.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

from scratchformer.config import available_memory, human_bytes
from scratchformer.config.decoding import check_alpha
from scratchformer.data.tokenizers import EOS_ID, UNK_ID, Tokenizer
from scratchformer.decoding.alignment import align as word_alignments
from scratchformer.decoding.beam import beam_search
from scratchformer.decoding.common import PAPER_EXTRA_LEN, special_ids
from scratchformer.decoding.constraints import check_repetition_options
from scratchformer.decoding.copies import repair_all
from scratchformer.decoding.copies import repair_copies as repair_text
from scratchformer.decoding.greedy import greedy_decode
from scratchformer.decoding.results import Hyp, Translation, join_parts
from scratchformer.decoding.sentences import join_translations, split_sentences
from scratchformer.errors import ConfigError, InputError
from scratchformer.model.transformer import EncoderDecoder


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
                            longest: int | None = None, cli: bool = False, n_best: int = 1,
                            no_repeat_ngram: int = 0, repetition_penalty: float = 1.0, members: int = 1) -> None:
    """One-line errors for decoding options that cannot work, before any decoding: a model that does not
    translate, sizes < 1, a non-finite or negative alpha, a max_len beyond the model's positions, and a beam
    wider than the vocabulary or than the machine's memory; an n_best outside [1, beam], a negative n-gram size
    and a penalty that is not positive. `sentences` / `longest` (source tokens) tighten the memory estimate when
    known; `cli` names the options as flags; `members`: models decoded together (an ensemble), each with its cache."""
    arch = getattr(getattr(model, "config", None), "arch", None)
    if arch != "encoder-decoder":
        raise InputError(f"translation needs an encoder-decoder model, got a {arch or type(model).__name__} one")
    for name, value in (("beam", beam), ("batch_size", batch_size)):
        if value < 1:
            raise ConfigError(f"{_named(name, value, cli)}: must be >= 1")
    for name, value in (("max_tokens", max_tokens), ("max_len", max_len)):
        if value is not None and value < 1:
            raise ConfigError(f"{_named(name, value, cli)}: must be >= 1 (or left unset)")
    if n_best < 1:
        raise ConfigError(f"{_named('n_best', n_best, cli)}: must be >= 1")
    if n_best > beam:
        raise ConfigError(f"{_named('n_best', n_best, cli)}: beam search keeps only {_named('beam', beam, cli)} "
                          f"hypotheses; give a beam of at least {n_best}")
    check_repetition_options(no_repeat_ngram, repetition_penalty, (_named("no_repeat_ngram", no_repeat_ngram, cli),
                             _named("repetition_penalty", repetition_penalty, cli)))
    check_alpha(alpha, _named("alpha", alpha, cli))
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
    need, have = members * search_bytes(model, rows, steps), available_memory()
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
    n_best: int = 1,
    no_repeat_ngram: int = 0,
    repetition_penalty: float = 1.0,
    prefix: str | Sequence[str | None] | None = None,
    split_sentences: bool = False,
    repair_copies: bool = False,
    align: bool = False,
    return_hyps: bool = False,
    ensemble: Sequence[EncoderDecoder] = (),
) -> list[str] | list[Translation]:
    """Translate `texts`, in order. beam=1 is greedy. Batches hold at most `batch_size` sentences and, if
    given, at most `max_tokens` padded source tokens. max_len: most output tokens per sentence (None: the
    paper's src_len + 50). Empty lines give empty outputs; sources longer than the model's max_len are cut
    (with one warning). split_sentences: every text is translated sentence by sentence and the parts joined
    (sentences.py), so a paragraph is neither cut nor decoded as one long sequence the model rarely saw.
    repair_copies: names, numbers and paths the model miscopied from each sentence are put back (copies.py); the
    text changes, a hypothesis' tokens stay the model's, and with align the text is left as decoded (alignments
    index the model's tokens).

    no_repeat_ngram / repetition_penalty: constraints.py. prefix: target text forced at the start of every
    output (a str), or one per text (None or "" for none); the output includes it; a split paragraph's prefix
    starts its first sentence. Returns list[str], or with n_best > 1, align or return_hyps one Translation per
    text (results.py: hypotheses with text, score, tokens and, with align, alignments; an empty text gets
    n_best empty hypotheses of score 0). ensemble: more models with the same vocabularies, whose probabilities
    are averaged with `model`'s at every step (ensemble.py; beam 1 is then beam search of width 1, i.e. greedy;
    alignments come from `model`'s cross-attention)."""
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
        raise InputError(f"texts must be a list of strings (one sentence each), got {type(texts).__name__}"
                         + ("" if isinstance(texts, str) or not isinstance(texts, Sequence) else " holding "
                            + ", ".join(sorted({type(t).__name__ for t in texts if not isinstance(t, str)}))))
    check_translate_options(model, beam, alpha, batch_size, max_tokens, max_len, n_best=n_best,
                            no_repeat_ngram=no_repeat_ngram, repetition_penalty=repetition_penalty)
    limit = model.config.max_len
    forced = prefix_ids(tgt_tok, prefix, len(texts), max_len or limit)
    owner, pieces = _parts(texts, split_sentences)  # sentence i belongs to texts[owner[i]]
    ids = src_tok.encode_batch(pieces)
    long = sum(len(s) + 1 > limit for s in ids)
    if long:
        warnings.warn(f"cut {long} source sentence(s) to the model's max_len={limit} tokens", stacklevel=2)
    srcs = [[*s[: limit - 1], EOS_ID] for s in ids]
    firsts = {o: i for i, o in reversed(list(enumerate(owner)))}  # a text's prefix starts its first sentence
    prefixes = [forced[o] if firsts[o] == i else [] for i, o in enumerate(owner)]
    todo = sorted((i for i, t in enumerate(pieces) if t.strip()), key=lambda i: -len(srcs[i]))  # longest first
    if todo and beam > 1:  # the memory of this search, now that its rows and lengths are known
        check_translate_options(model, beam, alpha, batch_size, max_tokens, max_len, len(todo), len(srcs[todo[0]]),
                                members=1 + len(ensemble))
    structured = n_best > 1 or align or return_hyps
    done: list[list] = [[] for _ in pieces]  # per sentence: its Hyps (structured) or its token ids
    for batch in _batches(todo, [len(s) for s in srcs], batch_size, max_tokens):
        src, pre = [srcs[i] for i in batch], [prefixes[i] for i in batch]
        options = dict(max_len=max_len, no_repeat_ngram=no_repeat_ngram, repetition_penalty=repetition_penalty,
                       prefixes=pre if any(pre) else None)
        if ensemble:
            options["ensemble"] = ensemble
        if structured:
            hyps = _hypotheses(model, tgt_tok, src, beam, alpha, n_best, align, options,
                               [pieces[i] for i in batch] if repair_copies and not align else None)
        elif beam == 1 and not ensemble:
            hyps = greedy_decode(model, src, **options)
        else:
            hyps = [h[0].tokens for h in beam_search(model, src, beam_size=beam, alpha=alpha, **options)]
        for i, h in zip(batch, hyps):
            done[i] = h
    by_text: list[list[int]] = [[] for _ in texts]
    for i, o in enumerate(owner):
        by_text[o].append(i)
    if not structured:
        return [join_translations([_text(tgt_tok, done[i], pieces[i] if repair_copies else None) for i in parts])
                for parts in by_text]
    empty = [Hyp("", 0.0, [], [] if align else None) for _ in range(n_best)]
    return [Translation(text, join_parts([done[i] for i in parts], [len(srcs[i]) - 1 for i in parts])
                        if text.strip() else empty) for text, parts in zip(texts, by_text)]


def _hypotheses(model: EncoderDecoder, tgt_tok: Tokenizer, src: list[list[int]], beam: int, alpha: float,
                n_best: int, align: bool, options: dict, repair_from: list[str] | None = None) -> list[list[Hyp]]:
    """n_best Hyps per source, from beam search (beam 1 included: its scores carry the length penalty);
    repair_from: the source texts whose miscopied spans each hypothesis' text gets back (copies.py)."""
    found = beam_search(model, src, beam_size=beam, alpha=alpha, n_best=n_best, **options)
    alignments: list[list[tuple[int, int]] | None] = [None] * sum(map(len, found))
    if align:
        bos, eos, pad = special_ids(model, None, None, None)
        alignments = word_alignments(model, [s for s, hs in zip(src, found) for _ in hs],
                                     [h.tokens for hs in found for h in hs], bos, eos, pad)
    flat = iter(alignments)
    texts = repair_from or [None] * len(found)
    return [[Hyp(_text(tgt_tok, h.tokens, s), h.score, h.tokens, next(flat)) for h in hs]
            for hs, s in zip(found, texts)]


def _text(tgt_tok: Tokenizer, tokens: list[int], source: str | None) -> str:
    """The text of target `tokens`, its miscopied spans put back from `source` (copies.py) unless that is None."""
    out = tgt_tok.decode(tokens)
    return out if source is None else repair_text(source, out)


def prefix_ids(tgt_tok: Tokenizer, prefix: str | Sequence[str | None] | None, n: int, most: int) -> list[list[int]]:
    """Forced target ids for each of `n` texts; one-line errors for a prefix of the wrong kind, one with text the
    target vocabulary lacks, and one of more than `most` tokens."""
    if prefix is None or isinstance(prefix, str):
        prefix = [prefix] * n
    elif not isinstance(prefix, Sequence) or len(prefix) != n:
        raise InputError(f"prefix must be a string or one per text (None for none), got "
                         f"{len(prefix) if isinstance(prefix, Sequence) else type(prefix).__name__} for {n} text(s)")
    out = []
    for p in prefix:
        if p is not None and not isinstance(p, str):
            raise InputError(f"prefix must be a string or None, got {type(p).__name__}")
        ids = tgt_tok.encode(p) if p else []
        if UNK_ID in ids:
            raise InputError(f"prefix {p!r} holds text the target vocabulary lacks; it would be "
                             "forced as <unk> and lost from the output")
        if len(ids) > most:
            raise ConfigError(f"prefix {p!r}: {len(ids)} target tokens, more than the "
                              f"{most} an output may have (max_len)")
        out.append(ids)
    return out


def translate_with(translate: Callable[[list[str]], list[str]], texts: Sequence[str], split_sentences: bool = False,
                   repair_copies: bool = False) -> list[str]:
    """`translate` (any engine's texts -> texts) with the text-level options around it: each text cut into its
    sentences first (split_sentences) and the parts joined after, each output's miscopied spans put back from its
    own source (repair_copies). What translate_texts does inside for our own decoder, for every engine."""
    owner, pieces = _parts(texts, split_sentences)
    outputs = translate(pieces)
    if repair_copies:
        outputs = repair_all(pieces, outputs)
    by_text: list[list[str]] = [[] for _ in texts]
    for o, out in zip(owner, outputs, strict=True):
        by_text[o].append(out)
    return [join_translations(parts) for parts in by_text]


def _parts(texts: Sequence[str], split: bool) -> tuple[list[int], list[str]]:
    """The sentences to translate and the text each belongs to: each text whole, or (with `split`) each text cut
    into its sentences (a text of one sentence, or a blank one, stays one piece)."""
    if not split:
        return list(range(len(texts))), list(texts)
    owner, pieces = [], []
    for i, text in enumerate(texts):
        parts = split_sentences(text) or [text]
        owner += [i] * len(parts)
        pieces += parts
    return owner, pieces


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

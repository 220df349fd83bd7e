"""Tokenizers: text <-> token ids, the step before the paper's input embedding.

One interface (`Tokenizer`), four kinds, each saved as one JSON file beside a checkpoint:

- ``char``    every character is a token (whitespace included); Chinese is split into characters.
- ``word``    words and punctuation by the regex ``\\w+|[^\\w\\s]`` (CJK characters one by one), case kept.
- ``bpe``     byte-level BPE from the Hugging Face ``tokenizers`` library (the paper's subword units).
- ``unigram`` byte-level Unigram LM from the same library (SentencePiece-style subwords).

Special tokens have the same ids in every kind: ``<pad>``=0, ``<s>``=1, ``</s>``=2, ``<unk>``=3.
``encode`` adds no specials (the batching code adds ``<s>``/``</s>``); ``decode`` skips them.

The subword kinds use a byte-level pre-tokenizer and decoder, so ``decode(encode(s)) == s`` for any
text (English, Chinese, emoji, odd whitespace) and no input ever becomes ``<unk>``.
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from scratchformer.config import regular_file
from scratchformer.config.fields import loads_json
from scratchformer.errors import N_, Message, ScratchformerError, ScratchformerWarning

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS: tuple[str, ...] = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_IDS = frozenset(range(len(SPECIALS)))

FORMAT = "scratchformer-tokenizer"
FORMAT_VERSION = 1
KINDS = ("char", "word", "bpe", "unigram")
DEFAULT_SUBWORD_VOCAB = 8000
BYTE_ALPHABET = 256  # the subword kinds always hold one token per byte
BOM = "\ufeff"  # a byte-order mark is file encoding, never text: it never becomes a token


class TokenizerError(ScratchformerError):
    """A tokenizer file that cannot be read: missing, not JSON, or JSON of the wrong shape."""


class Tokenizer:
    """The interface every kind implements; see the module docstring."""

    kind: str = ""

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, no specials added; unknown pieces map to UNK_ID."""
        raise NotImplementedError

    def encode_batch(self, texts: Iterable[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`, skipping the four specials (the caller cuts at EOS)."""
        raise NotImplementedError

    def tokenize(self, text: str) -> list[str]:
        """Readable pieces of `text`, one per id of `encode(text)` (labels for attention plots)."""
        raise NotImplementedError

    def id_to_token(self, i: int) -> str:
        raise NotImplementedError

    def token_to_id(self, token: str) -> int:
        """Id of `token`, UNK_ID if it is not in the vocabulary."""
        raise NotImplementedError

    def to_dict(self) -> dict:
        raise NotImplementedError

    def save(self, path: str | Path) -> None:
        """Write one JSON file; `load_tokenizer(path)` reads it back offline."""
        data = {"format": FORMAT, "version": FORMAT_VERSION, "kind": self.kind, **self.to_dict()}
        Path(path).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, vocab_size={self.vocab_size})"


class VocabTokenizer(Tokenizer):
    """Shared base of `char` and `word`: a plain list of tokens whose first four are the specials."""

    def __init__(self, tokens: list[str]) -> None:
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise ValueError(f"vocabulary must be a list of strings, got {type(tokens).__name__}")
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"vocabulary must start with {list(SPECIALS)}, got {tokens[:4]}")
        if len(set(tokens)) != len(tokens):
            raise ValueError("vocabulary has duplicate tokens")
        self.tokens = list(tokens)
        self.ids = {t: i for i, t in enumerate(self.tokens)}

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        get = self.ids.get
        return [get(p, UNK_ID) for p in self.tokenize(text)]

    def id_to_token(self, i: int) -> str:
        if not 0 <= i < len(self.tokens):
            raise IndexError(f"token id {i} out of range for vocabulary of size {len(self.tokens)}")
        return self.tokens[i]

    def token_to_id(self, token: str) -> int:
        return self.ids.get(token, UNK_ID)

    def pieces_of(self, ids: Iterable[int]) -> list[str]:
        return [self.id_to_token(int(i)) for i in ids if int(i) not in SPECIAL_IDS]

    def to_dict(self) -> dict:
        return {"tokens": self.tokens}


class CharTokenizer(VocabTokenizer):
    kind = "char"

    def tokenize(self, text: str) -> list[str]:
        return list(text)

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.pieces_of(ids))


# CJK ideographs, kana, hangul and full-width punctuation: one token each, written without spaces.
_CJK = "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_WORD_RE = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\w\s]")
_CJK_RE = re.compile(rf"[{_CJK}]")
_OPENERS = set("([{«¿¡")
_CLITICS = {"s", "t", "re", "ve", "ll", "d", "m"}


def _is_punct(piece: str) -> bool:
    return not (piece[0].isalnum() or piece[0] == "_")


class WordTokenizer(VocabTokenizer):
    kind = "word"

    def tokenize(self, text: str) -> list[str]:
        return _WORD_RE.findall(text)

    def decode(self, ids: Iterable[int]) -> str:
        return detokenize(self.pieces_of(ids))


def detokenize(pieces: list[str]) -> str:
    """Join word pieces with spaces, except before punctuation, after openers, around CJK, inside
    clitics ("don't") and inside numbers ("3.14", "25,000")."""
    out: list[str] = []
    prev = ""
    for i, p in enumerate(pieces):
        glue = (
            not out
            or (_is_punct(p) and p not in _OPENERS)
            or prev in _OPENERS
            or bool(_CJK_RE.match(p) or _CJK_RE.match(prev))
            or (prev == "'" and p.lower() in _CLITICS and i >= 2 and not _is_punct(pieces[i - 2]))
            or (prev in (".", ",") and p.isdigit() and i >= 2 and pieces[i - 2].isdigit())
        )
        out.append(p if glue else " " + p)
        prev = p
    return "".join(out)


def _count_vocab(tokenize, texts: Iterable[str], vocab_size: int | None, min_freq: int) -> list[str]:
    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(tokenize(t))
    for s in SPECIALS:
        counts.pop(s, None)
    for t in [t for t in counts if BOM in t]:  # a BOM inside a line (files joined with cat): not a token
        del counts[t]
    # Most frequent first; ties broken by the token itself so training is deterministic.
    ranked = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
    if vocab_size is not None:
        ranked = ranked[: max(0, vocab_size - len(SPECIALS))]
    return [*SPECIALS, *ranked]


class SubwordTokenizer(Tokenizer):
    """`bpe` and `unigram`: a wrapped `tokenizers.Tokenizer` with a byte-level pre-tokenizer/decoder."""

    def __init__(self, kind: str, hf) -> None:
        if kind not in ("bpe", "unigram"):
            raise ValueError(f"not a subword kind: {kind!r}")
        for i, s in enumerate(SPECIALS):
            if hf.token_to_id(s) != i:
                raise ValueError(f"special token {s!r} must have id {i}, has {hf.token_to_id(s)}")
        self.kind = kind
        self.hf = hf
        # A literal "<s>" typed in the input is text, not a special token (as in `char` and `word`).
        self.hf.encode_special_tokens = True

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return _unpanicked(self.hf.encode, text, add_special_tokens=False).ids

    def encode_batch(self, texts: Iterable[str]) -> list[list[int]]:
        # Parallel, in Rust; the `_fast` variant (tokenizers >= 0.21) skips computing offsets.
        encode = getattr(self.hf, "encode_batch_fast", self.hf.encode_batch)
        encs = _unpanicked(encode, list(texts), add_special_tokens=False)
        return [e.ids for e in encs]

    def decode(self, ids: Iterable[int]) -> str:
        return _unpanicked(self.hf.decode, [int(i) for i in ids], skip_special_tokens=True)

    def tokenize(self, text: str) -> list[str]:
        # Byte-level pieces ("Ġworld", "ä½ł") are unreadable, so label each token by the span of the
        # original text it covers; a character split over several byte tokens labels each of them.
        enc = _unpanicked(self.hf.encode, text, add_special_tokens=False)
        return [text[a:b] for a, b in enc.offsets]

    def id_to_token(self, i: int) -> str:
        tok = self.hf.id_to_token(int(i))
        if tok is None:
            raise IndexError(f"token id {i} out of range for vocabulary of size {self.vocab_size}")
        return tok

    def token_to_id(self, token: str) -> int:
        i = self.hf.token_to_id(token)
        return UNK_ID if i is None else i

    def to_dict(self) -> dict:
        return {"tokenizers_json": json.loads(self.hf.to_str())}


def _unpanicked(call, *args, **kwargs):
    """`call(*args, **kwargs)` of the tokenizers library, whose Rust panics (a regex that backtracks past Oniguruma's
    limit) arrive as a PanicException, a BaseException: one TokenizerError line instead."""
    try:
        return call(*args, **kwargs)
    except BaseException as e:
        if type(e).__name__ != "PanicException":
            raise
        detail = str(e).splitlines()[0][:200] if str(e) else "a panic"
        raise TokenizerError(N_("the tokenizers library failed on this input ({detail}); is the run's tokenizer "
                                "file one that scratchformer wrote?"), detail=detail) from None


# The pipeline our subword tokenizers write (_train_subword), the only one load_tokenizer accepts: any other part (a
# normalizer's regex, a Split pre-tokenizer, a template) is code we never wrote that would run on every input.
_PIPELINE = {"normalizer": None, "pre_tokenizer": "ByteLevel", "post_processor": None, "decoder": "ByteLevel",
             "truncation": None, "padding": None}
_MODELS = {"bpe": "BPE", "unigram": "Unigram"}


def foreign_part(kind: str, data: object) -> str | None:
    """What in a `tokenizers` JSON pipeline (a subword file's "tokenizers_json") our `kind` never writes, else None."""
    if not isinstance(data, dict):
        return f"tokenizers_json is {type(data).__name__}, not an object"
    for part, ours in _PIPELINE.items():
        value = data.get(part)
        found = value.get("type") if isinstance(value, dict) else value
        if found != ours or (ours is None and value is not None):
            return f"its {part} is {str(found)[:40]!r}, where ours is {ours!r}"
    model = data.get("model")
    found = model.get("type") if isinstance(model, dict) else model
    if found != _MODELS.get(kind):
        return f"its model is {str(found)[:40]!r}, where a {kind} tokenizer's is {_MODELS.get(kind)!r}"
    if model.get("dropout") is not None:
        return f"its model has dropout {model.get('dropout')!r}, where ours has none"
    return None


def _train_subword(kind: str, texts: Iterable[str], vocab_size: int | None, min_freq: int) -> Tokenizer:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    vocab_size = vocab_size or DEFAULT_SUBWORD_VOCAB
    common = dict(
        vocab_size=vocab_size,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    if kind == "bpe":
        hf = HFTokenizer(models.BPE(unk_token=UNK))
        trainer = trainers.BpeTrainer(min_frequency=min_freq, **common)
    else:
        hf = HFTokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(unk_token=UNK, **common)
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator(texts, trainer)
    return SubwordTokenizer(kind, hf)


def train_tokenizer(
    kind: str, texts: Iterable[str], vocab_size: int | None = None, min_freq: int = 1
) -> Tokenizer:
    """Learn a vocabulary of `kind` from `texts`; `vocab_size` counts the four specials.

    `char`/`word`: no cap when `vocab_size` is None; `bpe`/`unigram`: default 8000.
    `min_freq` is ignored by `unigram` (its trainer has no such option).
    """
    if kind == "char":
        tok: Tokenizer = CharTokenizer(_count_vocab(list, texts, vocab_size, min_freq))
    elif kind == "word":
        tok = WordTokenizer(_count_vocab(_WORD_RE.findall, texts, vocab_size, min_freq))
    elif kind in ("bpe", "unigram"):
        tok = _train_subword(kind, texts, vocab_size, min_freq)
    else:
        raise ValueError(f"unknown tokenizer kind {kind!r}; choose one of {', '.join(KINDS)}")
    _warn_if_nothing_learned(tok, vocab_size, min_freq)
    return tok


def _warn_if_nothing_learned(tok: Tokenizer, vocab_size: int | None, min_freq: int) -> None:
    """One warning when training learned no token beyond the specials (and the bytes of the subword kinds): every
    input would become <unk> (or single bytes), which is never what was meant."""
    floor = len(SPECIALS) + (BYTE_ALPHABET if tok.kind in ("bpe", "unigram") else 0)
    asked = vocab_size if vocab_size is not None else (DEFAULT_SUBWORD_VOCAB if floor > len(SPECIALS) else None)
    if tok.vocab_size > floor or (asked is not None and asked <= floor):
        return
    if tok.kind == "unigram":  # unigram has no min_freq
        message = N_("the {kind} tokenizer has only its {n} special tokens and the {bytes} bytes: the corpus is empty "
                     "or too small")
    elif floor > len(SPECIALS):
        message = N_("the {kind} tokenizer has only its {n} special tokens and the {bytes} bytes: the corpus is empty "
                     "or min_freq={min_freq} too high")
    else:
        message = N_("the {kind} tokenizer has only its {n} special tokens: the corpus is empty or min_freq={min_freq} "
                     "too high")
    warnings.warn(ScratchformerWarning(message, kind=tok.kind, n=len(SPECIALS), bytes=BYTE_ALPHABET, min_freq=min_freq),
                  stacklevel=3)


def tokenizer_from_dict(data: dict) -> Tokenizer:
    kind = data.get("kind")
    if kind == "char":
        return CharTokenizer(data["tokens"])
    if kind == "word":
        return WordTokenizer(data["tokens"])
    if kind in ("bpe", "unigram"):
        from tokenizers import Tokenizer as HFTokenizer

        return SubwordTokenizer(kind, HFTokenizer.from_str(json.dumps(data["tokenizers_json"])))
    raise ValueError(f"unknown tokenizer kind {kind!r}; choose one of {', '.join(KINDS)}")


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Read a file written by `Tokenizer.save`, whatever its kind; a bad file is one TokenizerError naming it."""
    path = regular_file(path, TokenizerError)
    hint = Message(N_("the file is truncated or corrupt: copy it again from the run it came from"))
    try:
        data = loads_json(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise TokenizerError(N_("{path} does not exist"), path=path) from None
    except UnicodeDecodeError as e:
        raise TokenizerError(N_("{path} is not a tokenizer file: not UTF-8 text ({reason}); {hint}"), path=path,
                             reason=e.reason, hint=hint) from None
    except json.JSONDecodeError as e:
        raise TokenizerError(N_("{path} is not a tokenizer file: not valid JSON ({e}); {hint}"), path=path, e=e,
                             hint=hint) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise TokenizerError(N_("{path}: not a scratchformer tokenizer file"), path=path)
    version = data.get("version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise TokenizerError(N_("{path}: tokenizer format version {version!r} is not a number; {hint}"), path=path,
                             version=version, hint=hint)
    if version > FORMAT_VERSION:
        raise TokenizerError(N_("{path}: tokenizer format version {version} is newer than this code"), path=path,
                             version=version)
    kind = data.get("kind")
    foreign = foreign_part(kind, data.get("tokenizers_json")) if isinstance(kind, str) and kind in _MODELS else None
    if foreign:
        raise TokenizerError(N_("{path}: {foreign}: a pipeline part scratchformer's tokenizers never write (it "
                                "would run on every input); use the tokenizer file of the run it came from"), path=path,
                             foreign=foreign)
    try:
        return tokenizer_from_dict(data)
    except Exception as e:  # wrong shapes: missing keys, a number for a token list, JSON the tokenizers library refuses
        detail = str(e).splitlines()[0] if str(e) else ""
        raise TokenizerError(N_("{path} is not a valid {get!s:.20} tokenizer file: {name}: {detail}; {hint}"),
                             path=path, get=data.get('kind'), name=type(e).__name__, detail=detail[:200],
                             hint=hint) from None

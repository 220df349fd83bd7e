"""What `Translator.translate` returns when asked for more than the best string (n_best > 1, align, return_hyps).

    Translation(src, hyps=[Hyp(text, score, tokens, alignment), ...])   one per input text, best first
    translation.to_dict()        {"src": ..., "hyps": [{"text", "score", "tokens"[, "alignment"]}]}   (--format jsonl)
    translation.text_lines(...)  ["text<TAB>score<TAB>alignment", ...]                                (--format text)

score is beam search's own: log P(tokens + EOS) / ((5 + |Y|) / 6) ** alpha (beam.py; with beam 1 the same
search with one beam, which is greedy decoding), under the penalized distribution when a repetition option is
on. tokens are target ids without BOS/EOS, the forced prefix included. A paragraph cut by --split-sentences
joins the k-th hypothesis of each of its sentences: its score is the sum of theirs, its tokens their
concatenation, and its alignment indices count over the concatenated source and target tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scratchformer.decoding.alignment import pharaoh
from scratchformer.decoding.sentences import join_translations


@dataclass
class Hyp:
    """One output of one input: its text, beam search's score, target ids, and (with align) its alignment."""

    text: str
    score: float
    tokens: list[int] = field(default_factory=list)
    alignment: list[tuple[int, int]] | None = None  # (source index, target index), subword level

    def to_dict(self) -> dict:
        out: dict = {"text": self.text, "score": self.score, "tokens": self.tokens}
        if self.alignment is not None:
            out["alignment"] = pharaoh(self.alignment)
        return out


@dataclass
class Translation:
    """The hypotheses of one input text, best first (n_best of them, fewer only if the search found fewer)."""

    src: str
    hyps: list[Hyp]

    def to_dict(self) -> dict:
        return {"src": self.src, "hyps": [h.to_dict() for h in self.hyps]}

    def text_lines(self, scores: bool) -> list[str]:
        """One line per hypothesis: its text, then a TAB and the score (if `scores`), then a TAB and the
        alignment (when aligned)."""
        lines = []
        for h in self.hyps:
            fields = [h.text, *([f"{h.score:.6f}"] if scores else []),
                      *([pharaoh(h.alignment)] if h.alignment is not None else [])]
            lines.append("\t".join(fields))
        return lines


def join_parts(parts: Sequence[list[Hyp]], source_lengths: Sequence[int]) -> list[Hyp]:
    """The hypotheses of a paragraph from those of its sentences (source_lengths: source tokens of each, EOS not
    counted): k-th with k-th, as the module docstring says."""
    if len(parts) == 1:
        return parts[0]
    joined = []
    for k in range(min(len(p) for p in parts)):
        hyps = [p[k] for p in parts]
        alignment: list[tuple[int, int]] | None = None
        if all(h.alignment is not None for h in hyps):
            alignment, src_off, tgt_off = [], 0, 0
            for h, n in zip(hyps, source_lengths):
                alignment += [(i + src_off, j + tgt_off) for i, j in h.alignment]
                src_off, tgt_off = src_off + n, tgt_off + len(h.tokens)
        joined.append(Hyp(join_translations([h.text for h in hyps]), sum(h.score for h in hyps),
                          [t for h in hyps for t in h.tokens], alignment))
    return joined

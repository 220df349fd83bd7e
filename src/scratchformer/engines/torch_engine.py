"""The reference engine: our own decoder (decoding/translate.py) on PyTorch, as `translate` has always run."""

from __future__ import annotations

from collections.abc import Sequence

from scratchformer.decoding import translate_texts
from scratchformer.runs import Run


class Translator:
    def __init__(self, run: Run, **options) -> None:
        self.run = run

    def translate(self, texts: Sequence[str], beam: int = 4, alpha: float = 0.6, max_len: int | None = None,
                  batch_size: int = 32) -> list[str]:
        r = self.run
        return translate_texts(r.model, r.src_tok, r.tgt_tok, list(texts), beam=beam, alpha=alpha,
                               batch_size=batch_size, max_len=max_len, ensemble=r.members)

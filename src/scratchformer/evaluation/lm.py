"""Evaluate a language-model (decoder-only) run: perplexity on a held-out split of its corpus.

    evaluate_lm("runs/lm-demo", split="test") -> {"perplexity": 41.2, "nll": 3.72, "tokens": 48210, ...}

Sentences are encoded as in training (<s> ids </s>, cut to the run's max_len) and every real token after
<s> is predicted, </s> included: perplexity = exp(mean NLL per predicted token), the number the trainer
logs as valid_ppl. Per-token perplexity depends on the tokenizer; `bits_per_char` (total NLL in bits over
the characters the tokens spell, plus one end-of-line per sentence) compares runs with different tokenizers.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from scratchformer.data.batching import collate_lm, encode_sentences, token_batches
from scratchformer.data.corpus import load_text
from scratchformer.data.tokenizers import PAD_ID
from scratchformer.errors import N_, ConfigError
from scratchformer.evaluation.metrics import perplexity

EVAL_MAX_TOKENS = 8192  # padded tokens per batch


def evaluate_lm(run_dir: str | Path, split: str = "test", weights: str | Path | None = None,
                corpus: str | None = None) -> dict[str, Any]:
    """Perplexity of a decoder-only run on `split` of its training corpus (or of `corpus`)."""
    from scratchformer.runs import load_run

    run = load_run(run_dir, weights)
    if run.model_config.arch != "decoder":
        raise ConfigError(N_("{run_dir} holds a {arch} model: perplexity here needs a decoder-only (language model) "
                             "run"), run_dir=run_dir, arch=run.model_config.arch)
    tc = run.train_config
    source = corpus or (tc.corpus if tc else None)
    if source is None:
        raise ConfigError(N_("{run_dir} has no train_config.json naming its corpus: pass --corpus"), run_dir=run_dir)
    max_len = min(tc.max_sentence_len if tc else run.model_config.max_positions, run.model_config.max_positions)
    holdout = tc.holdout if tc and not corpus else "none"  # the run's own splits of a one-file corpus
    texts = [t for t in load_text(source, split, side=tc.text_side if tc else "both", on_error="skip",
                                  holdout=holdout) if t]
    seqs = [s for s in encode_sentences(run.tgt_tok, texts, max_len) if len(s) > 2]
    if not seqs:
        raise ConfigError(N_("{source} ({split}) has no sentences to score"), source=source, split=split)
    start = time.time()
    batches = (collate_lm([seqs[i] for i in idx], PAD_ID)
               for idx in token_batches([len(s) for s in seqs], EVAL_MAX_TOKENS, shuffle=False, seed=0))
    ppl = perplexity(run.model, batches)
    tokens = sum(len(s) - 1 for s in seqs)
    nll = math.log(ppl)
    chars = sum(len(run.tgt_tok.decode(s)) + 1 for s in seqs)  # the text the ids cover (a cut sentence: its part)
    bits_per_char = nll * tokens / math.log(2) / chars
    return {"run_dir": str(run_dir), "corpus": source, "split": split, "sentences": len(seqs), "tokens": tokens,
            "nll": round(nll, 4), "perplexity": round(ppl, 2), "bits_per_char": round(bits_per_char, 4),
            "seconds": round(time.time() - start, 1)}

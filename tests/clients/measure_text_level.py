"""What a client that only searches loses against the run's own decoding (hf_card.TEXT_LEVEL_LOSS): sacreBLEU of
models/en-zh on the first N test sentences, beam 4 and greedy, with the run's split_sentences + repair_copies and
without (whole lines, the search alone, as `generate` / `translate_batch` decode). 90 s on one core for the
whole test split (1,000 sentences).

    PYTHONPATH=src python tests/clients/measure_text_level.py [N]     (N: the whole test split by default)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from scratchformer.data.corpus import load_pairs
from scratchformer.engines import Translator
from scratchformer.evaluation.metrics import bleu
from scratchformer.runs import load_run


def main(n: int | None = None) -> dict[str, float]:
    torch.set_num_threads(1)
    run = load_run(Path(__file__).resolve().parents[2] / "models" / "en-zh")
    pairs = load_pairs("en-zh", "test")[:n]
    srcs, refs = [s for s, _ in pairs], [t for _, t in pairs]
    text_level = {k: True for k in run.decoding.text_level()}
    scores = {}
    for beam in (1, 4):
        for name, options in (("full", text_level), ("search_only", {})):
            hyps = Translator.from_model(run.model, run.src_tok, run.tgt_tok).translate(srcs, beam=beam,
                                                                                  alpha=run.decoding.alpha, **options)
            scores[f"{name} beam{beam}"] = round(bleu(hyps, refs)["score"], 1)
    print(json.dumps({"sentences": len(srcs), **scores}))
    return scores


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else None)

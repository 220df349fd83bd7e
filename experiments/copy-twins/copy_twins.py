"""Copy-substitution twins, an experiment that did not ship (experiments/copy-twins/README.md): the fine-tuning data of
models/en-zh (`software` train, the six small sources x4) plus, for every train pair whose Chinese copies a name
from its English (a span of decoding/copies.py, 3+ characters with a letter), a twin in which each copied name (at
most 3) is swapped, on both sides, for another name the corpus copies. It teaches copying names the model has not
seen; measured on valid (experiments/software/software_sent4_eval.jsonl, label "copy-twins"), it changed
nothing the copy repair does not already do.

    python experiments/copy-twins/copy_twins.py runs/aug1.tsv
    scratchformer train --init models/en-zh --corpus runs/aug1.tsv --out runs/aug1 --max-steps 400 --warmup 50 \
        --lr-factor 0.05 --eval-every 0 --save-every 100 --no-test
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

from scratchformer.config.train import upsample_factors
from scratchformer.data.corpus import load_pairs, upsample_sources
from scratchformer.decoding.copies import COPYABLE

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "en-zh"
_LETTER = re.compile(r"[A-Za-z]")


def copied(src: str, tgt: str) -> list[str]:
    """The spans `tgt` copies from `src`, in order, each once: 3+ characters with a letter."""
    spans = set(COPYABLE.findall(src))
    return [w for w in dict.fromkeys(COPYABLE.findall(tgt)) if w in spans and len(w) >= 3 and _LETTER.search(w)]


def twins(pairs: list[tuple[str, str]], seed: int = 1) -> list[tuple[str, str]]:
    """One twin per pair that copies a name, its copied names swapped for names drawn from all copied ones."""
    pool = sorted({w for s, t in pairs for w in copied(s, t)})
    rng, out = random.Random(seed), []
    for s, t in pairs:
        names = copied(s, t)[:3]
        if not names:
            continue
        swap = {n: rng.choice(pool) for n in names}

        def sub(text: str, swap: dict[str, str] = swap) -> str:
            return COPYABLE.sub(lambda m: swap.get(m.group(0), m.group(0)), text)

        twin = (sub(s), sub(t))
        if twin != (s, t):
            out.append(twin)
    return out


def finetune_data(base: list[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """The shipped fine-tuning's data: `software` train (or `base`) with the --upsample of models/en-zh's
    train_config.json (experiments/forward-translation/forward_translate.py mixes its synthetic pairs into the same)."""
    base = load_pairs("software", "train") if base is None else base
    factors = upsample_factors(json.loads((SHIPPED / "train_config.json").read_text(encoding="utf-8"))["upsample"])
    return upsample_sources(base, "software", factors)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the TSV file to write")
    args = ap.parse_args()
    if args.out.is_dir() or not args.out.parent.is_dir():
        ap.error(f"{args.out}: give a file path in an existing folder")
    base = load_pairs("software", "train")
    upsampled, extra = finetune_data(base), twins(base)
    try:
        args.out.write_text("".join(f"{s}\t{t}\n" for s, t in upsampled + extra), encoding="utf-8")
    except OSError as e:
        ap.exit(2, f"{ap.prog}: error: cannot write {args.out}: {e.strerror}\n")
    print(f"{args.out}: {len(upsampled) + len(extra)} pairs, {len(extra)} of them twins")


if __name__ == "__main__":
    main()

"""`make demo`: the tour a newcomer waits for on a 2-core machine. How long it takes is not measured by benchmarks/
(no row in benchmarks/results.jsonl): single runs took 10.2 minutes (2026-12-02, when step 3 scored the 1,000 en-zh
test pairs) and 38.5 minutes from a fresh clone on an Intel Xeon under load 4-9 (2026-12-06, issue 46). Step 3 now
scores the model's own 1,498 software test pairs greedy: the row `bleu: models/en-zh, software test split, beam 1`
timed that at 32.6 s, 1 thread, Intel Xeon, load 7 (2026-12-06, commit 2141b70).

1. The seeds' sanity check: overfit the six toy pairs; every target must come back exactly.
2. A short run on the bundled English-Chinese corpus: the loss falls visibly, with curve and samples;
   honest about what a few CPU minutes cannot buy (translations).
3. The shipped checkpoint (models/en-zh, also installed with the package as `en-zh`), trained long with the same
   `train` command: real translations, and its headline test BLEU measured again on the same split with the same
   decoding as README.json's "headline" (scripts/ship_checkpoint.py --headline).
Each step prints the CLI command it runs, so it can be repeated by hand, and shows its progress. Its runs go to
runs/make-demo/ (OUT below), so that the README's tour, `train --recipe toy --out runs/toy` and a plain `train`
(runs/demo), starts in folders of its own.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

from scratchformer.cli import main

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "models" / "en-zh"
OUT = "runs/make-demo"  # the demo's runs: none of the folders the README's tour trains into
SENTENCES = ["Creates a new text document.", "Select the cells that you want to copy.",
             "Click the Borders tab.", "Inserts a new row above the current row."]


def run(*args: str) -> None:
    print(f"\n$ scratchformer {shlex.join(args)}", flush=True)
    code = main(list(args))
    if code:
        sys.exit(code)


def banner(text: str) -> None:
    print(f"\n{'=' * 100}\n{text}\n{'=' * 100}", flush=True)


def headline_line(headline: dict) -> str:
    """README.json's one BLEU figure with what it was measured on: split, sentences, decoding, signature."""
    return (f"BLEU {headline['bleu']} on {headline['split']} ({headline['sentences']} sentences), "
            f"{headline['decoding']}; sacreBLEU {headline['bleu_signature']}")


def main_demo() -> None:
    t0 = time.time()
    banner("1/3  Sanity check from the seeds: overfit six toy pairs (loss -> 0, every target reproduced)")
    run("train", "--recipe", "toy", "--out", f"{OUT}/toy", "--overwrite", "--no-test")
    run("evaluate", f"{OUT}/toy", "--split", "train", "--show", "6")

    banner("2/3  A short run on the bundled English-Chinese corpus (LibreOffice help, 21,665 training pairs)")
    print("A few CPU minutes teach the model the shape of the target language (the loss falls from ~8 to ~3),\n"
          "not yet translation: expect fluent-looking Chinese that ignores much of the source. The curve is in\n"
          f"{OUT}/demo/curve.png. Step 3 shows what the same command buys when it runs longer. The 400 steps end\n"
          "inside the recipe's 1,000-step warm-up on purpose (the warning below says so): the learning rate is still\n"
          "rising, which keeps so short a run stable; the long recipes run the whole schedule.")
    run("train", "--out", f"{OUT}/demo", "--overwrite", "--no-test")
    run("evaluate", f"{OUT}/demo", "--split", "test", "--limit", "300", "--show", "3")

    banner("3/3  The shipped checkpoint (models/en-zh), trained with `scratchformer train --recipe software`")
    if not (SHIPPED / "model.safetensors").exists():
        print(f"{SHIPPED} is not there (a checkout without the model files): skipping.")
    else:
        headline = json.loads((SHIPPED / "README.json").read_text(encoding="utf-8")).get("headline")
        run("translate", "en-zh", "--beam", "4", *SENTENCES)
        if headline:
            print(f"\nREADME.json's headline: {headline_line(headline)}\nmeasured again now (same split, same "
                  "decoding):", flush=True)
        run("evaluate", "en-zh", *(headline.get("args", []) if headline else []), "--show", "3")
    print(f"\ndemo finished in {(time.time() - t0) / 60:.1f} minutes")


if __name__ == "__main__":
    main_demo()

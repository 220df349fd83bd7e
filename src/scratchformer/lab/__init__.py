"""`scratchformer lab`: the seeds' questions answered by experiment, one file per experiment, this registry.

    EXPERIMENTS   name -> (run(out, quick) -> Result, the one-line question it answers; _() gives it in Chinese)
    run_experiment(name, out, quick)   runs one: out/NAME.png and out/NAME.json (numbers, conclusion, seconds)

Each experiment is seeded, small (under 5 minutes on 2 CPU cores; `quick` under one minute, for the tests) and
builds its conclusion from the numbers it measured. Floor 7, beside training/: it may import everything below.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import time
from collections.abc import Callable
from pathlib import Path

from scratchformer.errors import InputError
from scratchformer.i18n import N_, _, language
from scratchformer.inspect.fonts import chinese_text
from scratchformer.lab import (
    add_and_norm,
    complexity,
    exposure_bias,
    extrapolation,
    ffn,
    heads,
    heads_and_layers,
    label_smoothing,
    layernorm_vs_batchnorm,
    norm_placement,
    positions,
    residual,
    scaling,
)
from scratchformer.lab.common import Result, write_numbers
from scratchformer.runs import Writes, prepare_run_dir, writing_folder

EXPERIMENTS: dict[str, tuple[Callable[..., Result], str]] = {
    "scaling": (scaling.run, N_("Why divide the scores by sqrt(d_k)? Without it, does softmax tend to one-hot?")),
    "positions": (positions.run, N_("Without positional encoding, can attention see the order of the tokens?")),
    "heads": (heads.run, N_("Do the heads of a trained model learn different patterns? What does each one cost?")),
    "complexity": (complexity.run, N_("How do the time and memory of attention grow with the sequence length n?")),
    "norm-placement": (norm_placement.run, N_("Post-norm or pre-norm: which trains as the stack gets deeper, with and "
                       "without warm-up?")),
    "add-and-norm": (add_and_norm.run, N_("What do the seeds' own Add & Norm formulas compute, against the paper's?")),
    "layernorm-vs-batchnorm": (layernorm_vs_batchnorm.run,
                               N_("With padding in the batch, what does BatchNorm do that LayerNorm does not?")),
    "residual": (residual.run, N_("What do the residual connections buy? Training with and without them.")),
    "extrapolation": (extrapolation.run, N_("Sinusoidal or learned positions: which still works beyond the training "
                      "length?")),
    "label-smoothing": (label_smoothing.run, N_("Label smoothing eps 0 vs 0.1: what happens to accuracy, BLEU and "
                        "calibration (ECE)?")),
    "heads-and-layers": (heads_and_layers.run, N_("Seed 000's exercise: 8 -> 4 heads and 6 -> 2 layers. What changes "
                         "in the shapes, the parameters and the training?")),
    "ffn": (ffn.run, N_("Can the feed-forward network be removed? Training with and without it, at equal parameters "
            "and at equal width.")),
    "exposure-bias": (exposure_bias.run, N_("Teacher forcing trains on the true prefix, decoding reads the model's own "
                      "outputs: how much accuracy does that cost, and where?")),
}


def run_experiment(name: str, out: str | Path = "lab", quick: bool = False,
                   run_dir: str | Path | None = None, overwrite: bool = False, progress: bool = False) -> Result:
    """Run experiment `name`, writing out/NAME.png and out/NAME.json; returns its Result. run_dir: the trained run
    that `heads` inspects (default: the repository's models/en-zh). `out` is runs/folders.py's: new, empty, or a
    folder lab made (the experiment adds its files; `overwrite` first deletes what lab wrote there). progress: a line
    on stderr once the options are checked, saying what runs and for how long (its trainings show a bar on a
    terminal: common.train_tagger)."""
    if name not in EXPERIMENTS:
        raise InputError(N_("unknown experiment {name!r}; experiments: {EXPERIMENTS} (see `lab --list`)"), name=name,
                         EXPERIMENTS=', '.join(EXPERIMENTS))
    function, question = EXPERIMENTS[name]
    options = {"run_dir": run_dir} if run_dir is not None else {}
    if options and "run_dir" not in inspect.signature(function).parameters:
        raise InputError(N_("--run is for the experiments that inspect a trained model (heads), not {name}"), name=name)
    writes = Writes("lab", {f"{n}{ext}" for n in EXPERIMENTS for ext in (".png", ".json")}, append=True)
    out = prepare_run_dir(out, writes, overwrite=overwrite)  # before any work: new, empty, or one lab made
    with writing_folder(out, writes, overwrite) as tmp:  # written beside, then moved in
        if progress:  # once --out is known to be writable
            header = N_("lab {name}: {question} (under a minute on 2 CPU cores) ...") if quick else \
                N_("lab {name}: {question} (up to 5 minutes on 2 CPU cores) ...")
            print(_(header).format(name=name, question=_(question)), file=sys.stderr, flush=True)
        start = time.perf_counter()
        with chinese_text() if language() == "zh" else contextlib.nullcontext():  # Chinese plot labels get glyphs
            result = function(tmp, quick, **options)
        seconds = round(time.perf_counter() - start, 1)
        numbers = {"experiment": name, "language": language(), "question": _(question), "quick": quick,
                   "seconds": seconds, "conclusion": result.conclusion, "numbers": result.numbers}
        result.extra["json"] = write_numbers(tmp, name, numbers)
    result.figure = out / result.figure.name if result.figure is not None else None
    result.extra.update(json=out / result.extra["json"].name, seconds=seconds)
    return result

#!/usr/bin/env python3
"""Where one `translate` call's time goes, per sentence and per decoding step, on the shipped model.

    .venv/bin/python benchmarks/profile_translate.py [--run-dir models/en-zh] [--sentences 200] [--repeats 3]
                                                     [--threads 1] [--cells 1x1,32x1,1x4,32x4] [--step eager|captured]
                                                     [--json FILE]

Timing wrappers placed from outside (no edit to the model or the decoders): the tokenizers' encode_batch / decode,
`model.encode`, the output layer, the target embedding and the decoder layers (forward hooks on the modules' step,
the class's methods for the lean step of decoding/fast_step.py, which steps aside for hooks), and the search
functions the Translator calls. What is left inside a search once the model's calls are subtracted is the
search's own bookkeeping (limits, constraints, active-row compaction, beam reorder, device syncs, the Python of
each step); what is left of the call outside the searches and the tokenizers is batching and post-processing.
Each cell (batch x beam) runs `--repeats` times over the same sentences; the table shows medians in ms per sentence
and in us per decoding step (one step = one call of the decoder on all active rows).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import torch
from benchlib import ROOT, describe_machine, log, machine_info

import scratchformer.decoding.search as search_module
from scratchformer.config.decoding import DecodingOptions
from scratchformer.data.corpus import load_pairs
from scratchformer.decoding.captured import CapturedDecoder, CapturedSteps
from scratchformer.decoding.fast_step import LeanDecoder
from scratchformer.engines import Translator
from scratchformer.runs import load_run

PARTS = ("tokenisation", "encoder", "search bookkeeping", "target embedding", "decoder layers", "output layer",
         "detokenisation", "batching + post-processing")


class Clock:
    """Seconds spent in each named part, and how many decoder steps ran."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.steps = 0

    def wrap(self, name: str, fn: Callable[..., Any], count_steps: bool = False) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.steps += count_steps
        return timed

    def hook(self, module: torch.nn.Module, name: str, count_steps: bool = False) -> list[Any]:
        """Pre/post forward hooks that add the module's forward time to `name`."""
        started: list[float] = []

        def pre(*_: Any) -> None:
            started.append(time.perf_counter())

        def post(*_: Any) -> None:
            self.seconds[name] += time.perf_counter() - started.pop()
            if count_steps:
                self.steps += 1
        return [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]


@contextmanager
def instrumented(run: Any, clock: Clock):
    """Wrap the run's tokenizers, model parts and the searches the Translator calls; undone on exit."""
    model = run.model
    with ExitStack() as stack:
        def patch(obj: Any, attr: str, name: str, count_steps: bool = False) -> None:
            if not hasattr(obj, attr):
                return
            original = getattr(obj, attr)
            in_dict = attr in vars(obj)
            setattr(obj, attr, clock.wrap(name, original, count_steps))
            stack.callback(lambda: setattr(obj, attr, original) if in_dict else delattr(obj, attr))

        patch(run.src_tok, "encode_batch", "tokenisation")
        patch(run.tgt_tok, "encode", "tokenisation")  # target prefixes, when given
        patch(run.tgt_tok, "decode", "detokenisation")
        patch(model, "encode", "encoder")
        patch(model.generator, "logits", "output layer")
        patch(LeanDecoder, "__call__", "decoder layers", count_steps=True)  # the lean step (fast_step.py)
        patch(LeanDecoder, "embed", "target embedding")
        captured_init = CapturedSteps.__init__

        def timed_init(steps: CapturedSteps, model: Any, dec: CapturedDecoder, *rest: Any, **kw: Any) -> None:
            # the captured step runs the embedding, the decoder layers and the output layer as one graph: its time
            # goes to "decoder layers", its encoder package's (encoder and cross-attention projections) to
            # "encoder"; its reorders and cache growth stay in the search's bookkeeping
            timed = CapturedDecoder(clock.wrap("decoder layers", dec.step, count_steps=True),
                                    clock.wrap("encoder", dec.encoder) if dec.encoder is not None else None)
            captured_init(steps, model, timed, *rest, **kw)
        CapturedSteps.__init__ = timed_init
        stack.callback(lambda: setattr(CapturedSteps, "__init__", captured_init))
        for fn in ("greedy_decode", "beam_search"):  # the searches as the torch engine's TorchSearch calls them
            patch(search_module, fn, "search (all)")
        if LeanDecoder.for_model(model) is None:  # the modules' step: time them by hooks (a hook turns lean off)
            handles = clock.hook(model.decoder, "decoder layers", count_steps=True) + clock.hook(model.tgt_embed,
                                                                                                 "target embedding")
            stack.callback(lambda: [h.remove() for h in handles])
        yield


def translator(run: Any, batch: int, beam: int, step: str) -> Translator:
    """The one Translator on the torch engine, whole lines (no sentence splitting, no copy repair)."""
    return Translator(run, DecodingOptions(engine="torch", beam=beam, batch_size=batch, step=step))


def profile_cell(run: Any, texts: list[str], batch: int, beam: int, repeats: int, step: str = "eager"
                 ) -> dict[str, Any]:
    engine = translator(run, batch, beam, step)  # made once, as serve and the CLI do (it loads a captured package)
    engine.translate(texts[:4])  # warm-up (and a package's compile, once per beam width, into the user cache)
    """Median ms per sentence of each part over `repeats` calls, and us per decoder step."""
    rows: list[dict[str, float]] = []
    steps = 0
    for _ in range(repeats):
        clock = Clock()
        with instrumented(run, clock):
            start = time.perf_counter()
            engine.translate(texts)
            total = time.perf_counter() - start
        s = clock.seconds
        model_time = s["encoder"] + s["target embedding"] + s["decoder layers"] + s["output layer"]
        parts = {
            "tokenisation": s["tokenisation"], "encoder": s["encoder"],
            "search bookkeeping": s["search (all)"] - model_time,
            "target embedding": s["target embedding"], "decoder layers": s["decoder layers"],
            "output layer": s["output layer"], "detokenisation": s["detokenisation"],
            "batching + post-processing": total - s["search (all)"] - s["tokenisation"] - s["detokenisation"],
            "total": total}
        rows.append(parts)
        steps = clock.steps
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    return {"batch": batch, "beam": beam, "step": step, "sentences": len(texts), "steps": steps,
            "ms_per_sentence": {k: 1e3 * v / len(texts) for k, v in med.items()},
            "us_per_step": {k: 1e6 * v / max(steps, 1) for k, v in med.items()}}


def table(cells: list[dict[str, Any]]) -> str:
    head = "| part | " + " | ".join(f"batch {c['batch']}, {'greedy' if c['beam'] == 1 else 'beam ' + str(c['beam'])}"
                                     for c in cells) + " |"
    lines = [head, "|---|" + "---|" * len(cells)]
    for part in (*PARTS, "total"):
        cols = []
        for c in cells:
            ms, share = c["ms_per_sentence"][part], c["ms_per_sentence"][part] / c["ms_per_sentence"]["total"]
            cols.append(f"{ms:.2f} ms ({100 * share:.0f}%)")
        lines.append(f"| {part} | " + " | ".join(cols) + " |")
    lines.append("| decoder steps; us per step (decoder layers / whole search) | " + " | ".join(
        f"{c['steps']}; {c['us_per_step']['decoder layers']:.0f} / "
        f"{c['us_per_step']['search bookkeeping'] + c['us_per_step']['decoder layers'] + c['us_per_step']['output layer'] + c['us_per_step']['target embedding']:.0f}"  # noqa: E501
        for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run-dir", type=Path, default=ROOT / "models" / "en-zh")
    p.add_argument("--sentences", type=int, default=200, help="test sentences per cell (the first N)")
    p.add_argument("--batch1-sentences", type=int, default=50, help="of those, how many run at batch 1")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--cells", default="1x1,32x1,1x4,32x4", help="batch x beam cells")
    p.add_argument("--json", type=Path, default=None, help="also write the cells as JSON here")
    p.add_argument("--step", choices=("eager", "captured"), default="eager",
                   help="eager: the lean step (or the modules); captured: the AOTInductor package (decoding/captured.py"
                        "), compiled into the user cache first if needed; its one graph holds the target embedding, "
                        "the decoder layers and the output layer, all counted as 'decoder layers'")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    run = load_run(args.run_dir)
    corpus = run.train_config.corpus if run.train_config else "en-zh"
    texts = [s for s, _ in load_pairs(corpus, "test", on_error="skip")[: args.sentences]]
    cells = []
    for cell in args.cells.split(","):
        batch, beam = (int(x) for x in cell.split("x"))
        use = texts[: args.batch1_sentences] if batch == 1 else texts
        log(f"profile: batch {batch}, beam {beam}: {len(use)} sentences x {args.repeats}")
        cells.append(profile_cell(run, use, batch, beam, args.repeats, args.step))
    info = machine_info(args.threads)
    print(f"{describe_machine(info)}; step {args.step}; load {[round(x, 2) for x in os.getloadavg()]}")
    print(table(cells))
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "load": os.getloadavg(), "cells": cells}, indent=1))


if __name__ == "__main__":
    main()

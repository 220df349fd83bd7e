"""The reference engine: our own search on PyTorch (decoding/search.py), with every decoding option.

Its decoding step (`step`, config/decoding.py): eager, the lean step (decoding/fast_step.py); captured, that step
compiled ahead with AOTInductor (decoding/captured.py); auto, the captured step only where a package is already
cached and autotune measured it faster here. A package is compiled only under `step: captured`, with one line
saying so, into this user's cache (runs/cache.py: $XDG_CACHE_HOME/scratchformer, 0700, written atomically, content
hashed), one per CPU flags, torch version, weights digest and rows per sentence (1 for greedy, the beam width),
each holding two packages of the same step (one tuned for a few rows, one for any; rows, source length and capacity
are dynamic dimensions of both) and one of the encoder with the decoder's cross-attention projections (batch and
source length dynamic). Packages are only ever loaded from there,
under a name made from our own digest of the weights. Anything that fails runs the eager step, with one line.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from scratchformer import autotune
from scratchformer.config.decoding import DecodingOptions
from scratchformer.decoding import captured
from scratchformer.decoding.search import TorchSearch
from scratchformer.export.formats import weights_digest
from scratchformer.runs import Run
from scratchformer.runs.cache import find_private, private_cache, user_cache_dir

PACKAGE = "step.pt2"  # any row count
SMALL = "small_step.pt2"  # tuned for few rows (captured.by_rows)
ENCODER = "encoder.pt2"  # the encoder with the cross-attention projections (captured.StaticEncoder)
FORMAT = 6  # of the packages' layout and graph, part of every key (4: attention written out, 5: the encoder,
#            6: beams read their cache through an index)
SENTENCES = (1, 32)  # the batch sizes autotune times the two steps at


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class CapturedStepCache:
    """steps(group) -> the compiled step for `group` rows per sentence, or None (the eager step runs); loaded once."""

    def __init__(self, model: torch.nn.Module, mode: str) -> None:
        self.model, self.mode = model, mode
        self.loaded: dict[int, captured.CapturedDecoder | None] = {}
        self._digest: str | None = None
        self._why = captured.unavailable(model) if mode != "eager" else "eager"
        if self._why is not None and mode == "captured":
            say(f"--step captured: {self._why}; decoding with the eager step")

    def __call__(self, group: int) -> captured.CapturedDecoder | None:
        if group not in self.loaded:
            self.loaded[group] = None if self._why is not None else self._load(group)
        return self.loaded[group]

    def shapes(self, group: int) -> dict[str, Any]:
        """What autotune's record of this choice is keyed by (besides CPU, torch, threads): the step's geometry."""
        c = self.model.config
        return {"d_model": c.d_model, "d_ff": c.d_ff, "heads": c.n_heads, "layers": c.n_decoder_layers,
                "vocab": c.tgt_vocab_size, "group": group, "sentences": list(SENTENCES)}

    def stamp(self, group: int) -> dict[str, Any]:
        if self._digest is None:
            self._digest = weights_digest(self.model)
        return {"format": FORMAT, "cpu": hashlib.sha256(autotune.cpu_flags().encode()).hexdigest()[:16],
                "torch": torch.__version__, "weights": self._digest, "group": group}

    def _load(self, group: int) -> captured.CapturedDecoder | None:
        if self.mode == "auto" and autotune.recorded("decode-step", self.shapes(group)) != "captured":
            return None  # never measured here, or measured slower: nothing is compiled, nothing hashed
        stamp = self.stamp(group)
        name = "captured-" + hashlib.sha256(json.dumps(stamp, sort_keys=True).encode()).hexdigest()[:24]
        try:
            folder = find_private(name, stamp)
            if folder is None and self.mode == "auto":
                return None
            if folder is None:
                step = captured.StaticStep.for_model(self.model, group)
                say(f"compiling the decoding step for {group} row(s) per sentence with AOTInductor (once; about "
                    f"1-3 minutes) into {user_cache_dir() / name}")
                start = time.perf_counter()

                def write(tmp: Path) -> None:
                    captured.compile_step(step, tmp / PACKAGE)
                    captured.compile_step(step, tmp / SMALL, tuned=True)
                    captured.compile_encoder(captured.StaticEncoder(self.model), tmp / ENCODER)

                folder = private_cache(name, stamp, write)
                say(f"compiled in {time.perf_counter() - start:.0f} s")
            fn = captured.CapturedDecoder(
                captured.by_rows(captured.load_step(folder / SMALL), captured.load_step(folder / PACKAGE), group),
                captured.load_step(folder / ENCODER))
        except Exception as e:  # noqa: BLE001 - any failure of the optional fast path: the eager step, one line
            first = (str(e).splitlines() or [""])[0][:160]
            say(f"the captured decoding step failed ({type(e).__name__}: {first}); decoding with the eager step")
            return None
        if self.mode == "captured":  # measured once here, so that `auto` may use the package from now on
            eager = [captured.time_steps(self.model, None, group, n) for n in SENTENCES]
            fast = [captured.time_steps(self.model, fn, group, n) for n in SENTENCES]
            autotune.choose("decode-step", self.shapes(group), {"eager": lambda: [w() for w in eager],
                                                               "captured": lambda: [w() for w in fast]}, "eager")
        return fn


class Backend(TorchSearch):
    """The run's model, its ensemble members (decoding.json's or --ensemble's) and, with int8, both quantised; the
    decoding step of `options.step` (module docstring)."""

    def __init__(self, run: Run, options: DecodingOptions, **settings: Any) -> None:
        mode = options.step
        if mode != "eager" and (options.int8 or run.members):
            if mode == "captured":
                say("--step captured: not with int8 or an ensemble; decoding with the eager step")
            mode = "eager"
        steps = CapturedStepCache(run.model, mode) if mode != "eager" else None
        super().__init__(run.model, run.members, int8=options.int8, captured=steps)
        if mode == "captured":  # compiled (or loaded) now, not inside the first request: serve's start-up
            steps(1 if options.beam == 1 else options.beam)

"""The reference engine: our own search on PyTorch (decoding/search.py), with every decoding option.

Its decoding step (`step`, config/decoding.py): eager, the lean step (decoding/fast_step.py); captured, that step
compiled ahead with AOTInductor (decoding/captured.py), compiled on first use with one line saying so; auto, the
default, the captured step whenever it pays (CapturedStepCache.pays):
  - a package cached for this model, dtype, CPU and torch is used at once (unless autotune measured it slower here);
  - with none cached, a call that says how much it will decode (`translate --file`: `expected_tokens`) compiles,
    saying so with progress, when the compile's cost (measured here once, COMPILE_SECONDS before that) is below the
    time it saves (the tokens x the per-token saving measured here after a compile, SAVING_PER_ROW_TOKEN x rows per
    sentence before that), the tokens of earlier such calls that ran eager because they did not pay counted with
    its own (rent or buy: many small files compile once they have spent a compile's worth on the eager step); a
    call that does not (one sentence, a library call) never waits for a compile;
  - `serve` compiles in a background thread at start-up (`prepare(background=True)`) and decodes with the eager step
    until the package is ready (`in_use` says which: its /health);
  - without a C++ compiler, or for a model the step does not cover, the eager step runs, and where a compile would
    have run, one line says why; SCRATCHFORMER_AUTOTUNE=0 (the test suite) makes auto the eager step.
Packages live in this user's cache (runs/cache.py: $XDG_CACHE_HOME/scratchformer, 0700, written atomically, content
hashed), one per CPU flags, torch version, dtype, weights digest and rows per sentence (1 for greedy, the beam
width), weight packing and layout, each holding the step for any rows (rows, source length and capacity are
dynamic dimensions), a second one tuned by max-autotune (inductor's C++ micro-GEMMs), and one of the encoder with the
decoder's cross-attention projections. Three measured rules: packed or plain weights in the first
(CapturedStepCache.prepack), plain weights in the model's measured layout (CapturedStepCache.layout: load_run's
inference_layout), and the row counts the tuned one serves (timed after the compile, `small_rows`).
Packages are only ever loaded from there, under a name made from our own digest of the weights. Anything that fails
runs the eager step, with one line.

Its precision (`dtype`): fp32, bf16 (a bf16 copy of the weights; logits handed to the search in fp32), or auto:
bf16 where the CPU has AVX512-BF16 or AMX and autotune measured a decoding step's GEMMs faster in it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

from scratchformer import autotune
from scratchformer.config.decoding import DecodingOptions
from scratchformer.decoding import captured
from scratchformer.decoding.compile_home import building
from scratchformer.decoding.packing import linears_under, packed_gemm, packing_available, should_pack
from scratchformer.decoding.search import TorchSearch
from scratchformer.errors import N_, localized
from scratchformer.export.formats import weights_digest
from scratchformer.i18n import _
from scratchformer.runs import Run
from scratchformer.runs.cache import LIMIT_VAR, find_private, limit_bytes, private_cache, trim, user_cache_dir

PACKAGE = "step.pt2"  # any row count
SMALL = "small_step.pt2"  # tuned for few rows (captured.by_rows)
ENCODER = "encoder.pt2"  # the encoder with the cross-attention projections (captured.StaticEncoder)
FORMAT = 12  # of the packages' layout and graph, part of every key and of autotune's records of them (4: attention
#            written out, 5: the encoder, 6: beams read their cache through an index, 7: weights packed by a rule,
#            8: a tuned package with any rows, beams and plain weights included, 9: its GEMMs all inductor's C++
#            micro-GEMMs, its kernels single-threaded; 10: plain weights keyed by their layout, 11: attention as
#            broadcast sums, 12: sums in the tuned package only)
RULES = 2  # of what a decode-step record decides (2: the verdict weighs each batch size alike; small_rows)
SENTENCES = (1, 32)  # the batch sizes autotune times the two steps at
LADDER = (1, 2, 4, 8, 16, 32)  # the batch sizes the tuned package is timed against the other at (small_rows)
MEASURED_STEPS = 16  # decoding steps per timed call (captured.time_steps)
COMPILE_SECONDS = 120.0  # a beam width's three packages, until measured here: ~50 s on a quiet EPYC, 80-100 s on a
#                         2-core Xeon (the tuned package alone 60-70 s of them)
SAVING_PER_ROW_TOKEN = 2.5e-4  # seconds the captured step saves per output token and row of a sentence (x beam
#                               width), until measured here: the shipped model at batch 32 saves 0.2-0.4 ms greedy


def say(template: str, **fields: Any) -> None:
    """A line for the user on stderr, in their language (the template through the catalog, then filled in)."""
    print(_(template).format(**fields) if fields else _(template), file=sys.stderr, flush=True)


class CapturedStepCache:
    """steps(beam) -> the compiled step for `beam` rows per sentence, or None (the eager step runs); loaded once.
    mode: auto, captured (module docstring); expected_tokens: the output tokens this call will decode, if known."""

    def __init__(self, model: torch.nn.Module, mode: str, expected_tokens: int | None = None) -> None:
        self.model, self.mode, self.expected = model, mode, expected_tokens
        self.loaded: dict[int, captured.CapturedDecoder | None] = {}
        self._prepack: dict[int, bool] = {}  # per beam width: packed weights in its packages (prepack)
        self._pending: set[int] = set()  # groups compiling in the background (serve): the eager step meanwhile
        self._digest: str | None = None
        self._why = captured.unavailable(model) if mode != "eager" else "eager"
        if self._why is not None and mode == "captured":
            say(N_("--step captured: {why}; decoding with the eager step"), why=_(self._why))
        if mode == "auto" and not autotune.enabled():  # SCRATCHFORMER_AUTOTUNE=0: every default, the eager step
            self._why = "off"

    def __call__(self, beam: int) -> captured.CapturedDecoder | None:
        if beam in self._pending:
            return None
        if beam not in self.loaded:
            if self._why is not None:
                self._explain(beam)
            self.loaded[beam] = None if self._why is not None else self._load(beam)
        return self.loaded[beam]

    def prepare(self, beam: int, background: bool = False) -> None:
        """The step for `beam` loaded, compiled if no package is cached (auto and captured alike), and timed if this
        thread count has no record of it (a package compiled by a process with other threads), now or in a
        background thread (serve: the eager step answers until it is ready)."""
        if self._why is not None:
            self._explain(beam, always=True)
            self.loaded[beam] = None
            return
        if not background:
            self.loaded[beam] = self._load(beam, compile=True)
            return
        self._pending.add(beam)

        def work() -> None:
            try:
                self.loaded[beam] = self._load(beam, compile=True)
            finally:
                self._pending.discard(beam)

        threading.Thread(target=work, name="scratchformer-compile", daemon=True).start()

    def in_use(self, beam: int) -> str:
        """"captured", "compiling" (in the background; eager meanwhile) or "eager": what decodes `beam` now."""
        if beam in self._pending:
            return "compiling"
        return "captured" if self.loaded.get(beam) is not None else "eager"

    def _explain(self, beam: int, always: bool = False) -> None:
        """One line where a compile would have run but cannot (no compiler, a model the step does not cover)."""
        if self._why not in ("eager", "off") and (always or (self.mode == "auto" and self.pays(beam)[0])):
            say(N_("the captured decoding step cannot be built here ({why}); decoding with the eager step"),
                why=_(self._why))
        return False

    def shapes(self, beam: int) -> dict[str, Any]:
        """What autotune's records of this choice are keyed by (besides CPU, torch, threads): the step's geometry."""
        c = self.model.config
        return {"d_model": c.d_model, "d_ff": c.d_ff, "heads": c.n_heads, "layers": c.n_decoder_layers,
                "vocab": c.tgt_vocab_size, "group": beam, "sentences": list(SENTENCES), "dtype": self.dtype(),
                "format": FORMAT, "prepack": self.prepack(beam), "layout": self.layout(beam), "rules": RULES}

    def prepack(self, beam: int) -> bool:
        """Whether `beam`'s packages run packed weights (inductor's weight prepack: MKL's packed sgemm for fp32,
        oneDNN's packed GEMMs for bf16) or plain GEMMs on the frozen weights. bf16: packed (on a Xeon with AMX the
        packed bf16 step ran 1.2-2.2x the plain one, 1 to 32 sentences). fp32: packed only where MKL's packed
        sgemm measures faster than the plain one at this step's rows, one sentence's and 32 sentences'
        (packing.should_pack: autotune's `mkl-packing`, timed once per CPU); on a Xeon with AVX-512 it did not,
        and the plain package ran 1.3-1.6x the packed ones (docs/performance.md)."""
        if beam not in self._prepack:
            if self.dtype() != "float32":
                self._prepack[beam] = True
            else:
                linears = linears_under([self.model.decoder, self.model.generator])  # what the eager step packs
                self._prepack[beam] = packing_available() and all(should_pack(linears, rows)
                                                                  for rows in (beam, SENTENCES[-1] * beam))
        return self._prepack[beam]

    def layout(self, beam: int) -> str:
        """How the weights of `beam`'s packages are laid out: "packed" (prepack), else the model's own layout, which
        freezing keeps: "column-major" where load_run's measured rule stored them so (model.inference_layout,
        autotune's `linear-layout`, per thread count), else "row-major". Plain fp32 GEMMs on column-major weights
        ran the step 1.3-1.4x faster at 16-32 rows with 1 thread (docs/performance.md). Part of the key: before it,
        a package held whichever layout the process that compiled it had, and served every other one."""
        if self.prepack(beam):
            return "packed"
        weight = next((m.weight for m in linears_under([self.model.decoder])), None)
        column = weight is not None and not weight.is_contiguous() and weight.t().is_contiguous()
        return "column-major" if column else "row-major"

    def dtype(self) -> str:
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")

    def pays(self, beam: int, tokens: int | None = None) -> tuple[bool, float, float]:
        """(compile?, the compile's estimated seconds, the estimated seconds it saves) for a call decoding `tokens`
        output tokens (default: expected_tokens) at `beam` rows per sentence, counting with them the tokens earlier
        calls of known size decoded with the eager step because it did not pay then (`decode-eager-tokens`, per
        thread count): compile when cost < saving. So a user who translates many files of a size that never pays
        alone gets the compile once their calls together have spent its cost on the eager step (the rent-or-buy
        rule: at most about twice what compiling at the start would have cost, whatever comes next)."""
        tokens = self.expected if tokens is None else tokens
        shapes = self.shapes(beam)
        cost = (autotune.entry("decode-compile", shapes) or {}).get("seconds", COMPILE_SECONDS)
        per_token = (autotune.entry("decode-step", shapes) or {}).get("saving_per_token",
                                                                       SAVING_PER_ROW_TOKEN * beam)
        earlier = autotune.count("decode-eager-tokens", shapes)
        saving = max(0.0, float(per_token)) * ((tokens or 0) + earlier)
        return float(cost) < saving, float(cost), saving

    def stamp(self, beam: int) -> dict[str, Any]:
        if self._digest is None:
            self._digest = weights_digest(self.model)
        return {"format": FORMAT, "cpu": hashlib.sha256(autotune.cpu_flags().encode()).hexdigest()[:16],
                "torch": torch.__version__, "dtype": self.dtype(), "weights": self._digest, "group": beam,
                "prepack": self.prepack(beam), "layout": self.layout(beam)}

    def _load(self, beam: int, compile: bool | None = None) -> captured.CapturedDecoder | None:
        """The package for `beam`, from the cache, else compiled when `compile` (default: captured mode, or auto
        where the rule says it pays), else None."""
        if self.mode == "auto" and autotune.recorded("decode-step", self.shapes(beam)) == "eager":
            return None  # measured slower here: nothing is compiled or loaded
        may_compile = compile if compile is not None else self.mode == "captured" or self.expected is not None
        if not may_compile and not any(autotune.user_cache_root().glob("captured-*")):
            return None  # nothing cached at all: no digest of the weights for a one-sentence call
        stamp = self.stamp(beam)
        name = "captured-" + hashlib.sha256(json.dumps(stamp, sort_keys=True).encode()).hexdigest()[:24]
        compiled = False
        try:
            folder = find_private(name, stamp)
            if folder is None:
                if compile is None:
                    compile = self.mode == "captured" or (self.expected is not None and self._announce(beam))
                if not compile:
                    return None
                folder, compiled = self._compile(name, stamp, beam), True
            small = captured.load_step(folder / SMALL) if (folder / SMALL).is_file() else None
            large, encoder = captured.load_step(folder / PACKAGE), captured.load_step(folder / ENCODER)
            record = autotune.entry("decode-step", self.shapes(beam))  # per thread count: a package serves them all
            timing = record is None and (self.mode == "captured" or compile or (self.expected is not None
                                                                                 and self.pays(beam)[0]))
            if compiled or timing:  # so that auto may use it, serves each row count from the faster one, and knows
                return self._measure(small, large, encoder, beam)  # the saving; only a call that could pay for a
            #                                                        compile waits for it (serve's start-up, a big file)
        except Exception as e:  # noqa: BLE001 - any failure of the optional fast path: the eager step, one line
            first = (localized(e, _).splitlines() or [""])[0][:160]  # ours in the user's language, torch's as is
            say(N_("the captured decoding step failed ({kind}: {first}); decoding with the eager step"),
                kind=type(e).__name__, first=first)
            return None
        most = (record or {}).get("small_rows", captured.SMALL_ROWS if beam == 1 else beam)  # unmeasured: few rows
        if not (most is None or (isinstance(most, int) and not isinstance(most, bool) and most >= 0)):
            most = 0  # a damaged record: the package for any rows alone
        return captured.CapturedDecoder(captured.by_rows(small, large, most), encoder)

    def _announce(self, beam: int) -> bool:
        """The rule for a call of known size, and one line saying what it decided to compile; where it does not,
        the call's tokens are counted for the next call's rule (pays)."""
        ok, cost, saving = self.pays(beam)
        shapes = self.shapes(beam)
        earlier = autotune.count("decode-eager-tokens", shapes)
        if not ok:
            autotune.tally("decode-eager-tokens", shapes, self.expected or 0)
        elif earlier:
            say(N_("compiling the captured decoding step: this call's {tokens} tokens and the {earlier} that earlier "
                   "calls decoded with the eager step should save about {saving:.0f} s for about {cost:.0f} s of "
                   "compiling, once (--step eager skips it)"),
                saving=saving, tokens=self.expected, earlier=earlier, cost=cost)
        else:
            say(N_("compiling the captured decoding step: it should save about {saving:.0f} s of this call's "
                   "{tokens} tokens for about {cost:.0f} s of compiling, once (--step eager skips it)"),
                saving=saving, tokens=self.expected, cost=cost)
        return ok

    def _compile(self, name: str, stamp: dict[str, Any], beam: int) -> Path:
        limit_bytes()  # a bad SCRATCHFORMER_CACHE_LIMIT_GB is one line before the compile, not after it
        step = captured.StaticStep.for_model(self.model, beam)
        say(N_("compiling the decoding step for {beam} row(s) per sentence with AOTInductor (once; about "
               "{minutes:.0f} minute(s)) into {folder}"), beam=beam, minutes=self.pays(beam, 0)[1] / 60,
            folder=user_cache_dir() / name)
        start = time.perf_counter()

        packed = self.prepack(beam)

        def write(tmp: Path) -> None:
            parts = ((PACKAGE, N_("the step for any batch"), lambda p: captured.compile_step(step, p, prepack=packed)),
                     (SMALL, N_("the step tuned by max-autotune"),
                      lambda p: captured.compile_step(step, p, tuned=True)),
                     (ENCODER, N_("the encoder"),
                      lambda p: captured.compile_encoder(captured.StaticEncoder(self.model), p, prepack=packed)))
            for i, (file, what, make) in enumerate(parts, start=1):
                say(N_("  [{i}/{n}] {what} ({seconds:.0f} s so far)"), i=i, n=len(parts), what=_(what),
                    seconds=time.perf_counter() - start)
                make(tmp / file)

        with building():  # torch's build cache for these packages alone, removed after them
            folder = private_cache(name, stamp, write)
        seconds = time.perf_counter() - start
        say(N_("compiled in {seconds:.0f} s"), seconds=seconds)
        removed = trim(folder)
        if removed:
            say(N_("removed the {n} cached folder(s) used longest ago ({mb:.0f} MB) to keep the cache within "
                   "{var}={gb:g}"), n=len(removed), mb=sum(size for _, size in removed) / 2**20, var=LIMIT_VAR,
                gb=limit_bytes() / 2**30)
        autotune.record("decode-compile", self.shapes(beam), {"seconds": round(seconds, 1)})
        autotune.tally("decode-eager-tokens", self.shapes(beam), 0, restart=True)  # paid: the count starts again
        return folder

    def _measure(self, small: captured.StepPackage | None, large: captured.StepPackage,
                 encoder: captured.EncoderPackage, beam: int) -> captured.CapturedDecoder:
        """Times and keeps (autotune's clock, interleaved) the two rules of a new package, and returns the step
        they make: the tuned package against the other at LADDER sentences (`small_rows`: the rows up to which
        the tuned one serves, captured.rows_served); then the eager and that captured step at SENTENCES: the
        verdict (captured only if clearly faster over both, each batch size weighing alike: its seconds over the
        eager step's, summed; raw seconds would let 32 sentences outweigh one, and one-sentence calls are the
        interactive ones), and the seconds saved per output token at the larger batch."""
        most = 0
        if small is not None:
            rows = {n * beam: autotune.TUNER.seconds({
                name: captured.time_steps(self.model, captured.CapturedDecoder(fn, encoder), beam, n, MEASURED_STEPS)
                for name, fn in (("tuned", small), ("any", large))}) for n in LADDER}
            most = captured.rows_served(rows)
        fn = captured.CapturedDecoder(captured.by_rows(small, large, most), encoder)
        times = {n: autotune.TUNER.seconds({"eager": captured.time_steps(self.model, None, beam, n, MEASURED_STEPS),
                                            "captured": captured.time_steps(self.model, fn, beam, n,
                                                                            MEASURED_STEPS)})
                 for n in SENTENCES}
        total = {k: sum(t[k] for t in times.values()) for k in ("eager", "captured")}
        relative = {k: sum(t[k] / t["eager"] for t in times.values()) for k in ("eager", "captured")}
        big = SENTENCES[-1]
        autotune.record("decode-step", self.shapes(beam), {
            "choice": autotune.pick(relative, "eager"), "seconds": total, "small_rows": most,
            "saving_per_token": (times[big]["eager"] - times[big]["captured"]) / (big * MEASURED_STEPS)})
        return fn


def decoding_dtype(run: Run, options: DecodingOptions) -> str:
    """"fp32" or "bf16": options.dtype, auto resolved by autotune's measured rule, timing the GEMMs of the step that
    will decode: the captured step's (oneDNN's packed bf16) where it can be built and the step is not forced eager,
    else the eager step's; ensembles: fp32. An explicit bf16 on a CPU without AVX512-BF16 or AMX runs, with one
    line saying it will be slow. (int8 is CTranslate2's: the Translator refuses it here, config/decoding.py's
    check_for.)"""
    if run.members:
        return "fp32"
    if options.dtype == "auto":
        c = run.model.config
        packed = (options.step != "eager" and captured.unavailable(run.model) is None
                  and packing_available(torch.bfloat16))
        return autotune.decoding_dtype(c.d_model, c.d_ff, c.tgt_vocab_size, packed_gemm=packed_gemm if packed else None)
    if options.dtype == "bf16" and not autotune.has_bf16():
        say(N_("--dtype bf16: this CPU has neither AVX512-BF16 nor AMX, so bf16 is emulated and slower than fp32"))
    return options.dtype


class Backend(TorchSearch):
    """The run's model (a bf16 copy with dtype bf16) and its ensemble members (decoding.json's or --ensemble's); the
    decoding step of `options.step` (module docstring). expected_tokens: the output tokens this call will decode,
    where known (translate --file), for the step rule."""

    def __init__(self, run: Run, options: DecodingOptions, expected_tokens: int | None = None,
                 **settings: Any) -> None:
        mode = options.step
        if mode != "eager" and run.members:
            if mode == "captured":
                say(N_("--step captured: not with an ensemble; decoding with the eager step"))
            mode = "eager"
        self.dtype = decoding_dtype(run, options)
        model = run.model if self.dtype == "fp32" else copy.deepcopy(run.model).to(torch.bfloat16)
        self.beam = options.beam
        steps = CapturedStepCache(model, mode, expected_tokens) if mode != "eager" else None
        super().__init__(model, run.members, captured=steps)
        if mode == "captured" or (steps is not None and expected_tokens is not None):
            steps(self.beam)  # compiled (or loaded) now, not inside the first batch

    def prepare_step(self, background: bool = False) -> None:
        """serve's start-up: the captured step of the server's beam loaded or compiled (in the background)."""
        if isinstance(self.captured, CapturedStepCache) and self.captured.mode == "auto" and \
                self.captured._why != "off":
            self.captured.prepare(self.beam, background)

    def step_in_use(self) -> str:
        """What decodes the server's beam now: captured, compiling (eager meanwhile) or eager; with the dtype."""
        state = self.captured.in_use(self.beam) if isinstance(self.captured, CapturedStepCache) else "eager"
        return f"{state} {self.dtype}"

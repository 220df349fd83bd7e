"""Measured choices between fast paths: time the candidates once per machine and shape, keep the outcome.

    choice = autotune.choose("linear-layout", shapes, {"row-major": run_a, "column-major": run_b}, "row-major")

A fast path that pays on one CPU can cost on another (column-major Linear weights and MKL-packed GEMMs
measured 1.15-1.7x faster on a Xeon; other CPUs, MKL builds and thread counts differ). So each decision is
timed on the real shapes: every candidate runs a few ms, the minimum of several interleaved repetitions
counts, and a candidate replaces the default only when it is clearly faster (MARGIN). The outcome is kept
per (decision, CPU model name, torch version, thread count, shapes) in a JSON file under
$XDG_CACHE_HOME/scratchformer (else ~/.cache/scratchformer), written atomically; an unreadable or corrupt
file is measured again, an unwritable folder is simply not used. A machine already busy (1-minute load
average above its core count) cannot time a few ms reliably: then the default serves this process and nothing
is cached, so a quieter run measures. SCRATCHFORMER_AUTOTUNE=0 measures nothing and takes every default (the
plain row-major layout, no packing); the test suite runs that way.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import platform
import stat
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

ENV = "SCRATCHFORMER_AUTOTUNE"
MARGIN = 1.10  # a candidate must run the measured work >= 10% faster than the default to replace it
REPEATS = 5  # timed calls per candidate (after one warm-up call); the minimum counts
_VERSION = 1  # of the cache file's layout
# The rows at which decoding's dtype rule (decoding_dtype) times one step's GEMMs. The eager step's witness, ATen's
# GEMMs: one sentence and a batch. A package's witness, oneDNN's packed bf16 GEMMs: a batch only. Called from Python
# the packed op costs ~28 us at one row (fp32's plain GEMM ~8 us), so at 1 and 32 rows the witness read a tie (1.05x
# with 2 threads on a Xeon with AMX: fp32 chosen) while the cached packages ran 1.2x (1 sentence), 1.5x (4) and
# 1.9-2.3x (32) faster in bf16; at 32 rows alone it reads 1.4-2.3x, as the packages do (docs/performance.md).
PLAIN_ROWS = (1, 32)
PACKED_ROWS = (32,)

Measure = Callable[[str, Callable[[], object]], float]  # (candidate name, its work) -> seconds for one call


def enabled() -> bool:
    """False when SCRATCHFORMER_AUTOTUNE=0: take the defaults, measure nothing."""
    return os.environ.get(ENV, "1").strip() != "0"


def _cpuinfo(*fields: str) -> str | None:
    """The value of the first /proc/cpuinfo line that starts with one of `fields` (lower case), or None."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith(fields) and ":" in line:
                return line.split(":", 1)[1]
    except OSError:
        pass
    return None


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), else what the platform module knows."""
    name = _cpuinfo("model name", "hardware")  # x86; some ARM kernels
    return name.strip() if name is not None else platform.processor() or platform.machine() or "unknown"


def has_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX): elsewhere bf16 runs slower than fp32."""
    flags = cpu_flags().split()
    return "avx512_bf16" in flags or any(f.startswith("amx") for f in flags)


def cpu_flags() -> str:
    """The CPU's feature flags (/proc/cpuinfo), sorted: what generated code may use (AVX-512, AMX); "" if unknown."""
    return " ".join(sorted((_cpuinfo("flags", "features") or "").split()))


def user_cache_root() -> Path:
    """$XDG_CACHE_HOME/scratchformer, else ~/.cache/scratchformer: every per-user cache of ours lives under it
    (runs/cache.py's private folders too). A relative XDG_CACHE_HOME is ignored, as the XDG spec says."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "scratchformer"


NOT_PRIVATE = ("not a folder of yours that only you can write (a link, another owner, or group/world-writable): "
               "remove it, or set XDG_CACHE_HOME elsewhere")


def private_dir(path: Path) -> Path:
    """`path`, made 0700 if missing (its parents too), where a cache of ours or the code torch compiles for us may
    live: a real folder of this user's that nobody else may write. OSError if it cannot be made; PermissionError
    (its strerror: NOT_PRIVATE) if it is anything else."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir(mode=0o700, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise PermissionError(errno.EACCES, NOT_PRIVATE, str(path))
    return path


def default_cache_path() -> Path:
    return user_cache_root() / "autotune.json"


def machine_busy() -> bool:
    """The 1-minute load average exceeds the core count: timings would measure the other jobs."""
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1)
    except OSError:  # no load average (some platforms)
        return False


def time_once(name: str, work: Callable[[], object]) -> float:
    """Wall-clock seconds of one call of `work` (the real Measure; tests inject a fake one)."""
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


class Tuner:
    """Decides, measures and remembers. `measure` and `path` are injectable (tests: a fake clock, a tmp file)."""

    def __init__(self, path: Path | None = None, measure: Measure = time_once, repeats: int = REPEATS,
                 margin: float = MARGIN, busy: Callable[[], bool] = machine_busy) -> None:
        self.path, self.measure, self.repeats, self.margin, self.busy = path, measure, repeats, margin, busy
        self._memo: dict[str, str] = {}  # key -> choice, for this process

    def choose(self, decision: str, shapes: Any, candidates: Mapping[str, Callable[[], object]],
               default: str) -> str:
        """The name of the candidate to use for `decision` on these `shapes` (JSON-able): the default unless
        another measured faster by more than the margin. Measured once per key; later calls read the cache."""
        if not enabled() or len(candidates) < 2:
            return default
        key = self._key(decision, shapes)
        if key in self._memo:
            return self._memo[key]
        stored = self._read().get(key)
        if isinstance(stored, dict) and stored.get("choice") in candidates:
            choice = stored["choice"]
        elif self.busy():
            choice = default  # for this process only: not cached
        else:
            times = self._time(candidates)
            choice = pick(times, default, self.margin)
            self._write(key, {"choice": choice, "seconds": times})
        self._memo[key] = choice
        return choice

    def recorded(self, decision: str, shapes: Any) -> str | None:
        """The choice measured earlier for `decision` on these `shapes` on this machine, or None: measures nothing
        (a choice that costs a compile to measure, such as the captured decoding step, is read here)."""
        if not enabled():
            return None
        key = self._key(decision, shapes)
        stored = self._memo.get(key) or self._read().get(key)
        return stored if isinstance(stored, str) else stored.get("choice") if isinstance(stored, dict) else None

    def entry(self, decision: str, shapes: Any) -> dict[str, Any] | None:
        """The whole record kept for `decision` on these `shapes` here (its choice and measured figures), or None:
        measures nothing."""
        if not enabled():
            return None
        stored = self._read().get(self._key(decision, shapes))
        return stored if isinstance(stored, dict) else None

    def record(self, decision: str, shapes: Any, entry: dict[str, Any]) -> bool:
        """Keep `entry` (JSON-able; a "choice" in it is what `recorded` answers) for `decision` on these `shapes`,
        measured by the caller (a compile's seconds, a saving per token). Nothing is kept when autotune is off or
        the machine is busy (the figure would measure the other jobs): returns whether it was kept."""
        if not enabled() or self.busy():
            return False
        key = self._key(decision, shapes)
        if isinstance(entry.get("choice"), str):
            self._memo[key] = entry["choice"]
        self._write(key, entry)
        return True

    def count(self, decision: str, shapes: Any) -> int:
        """The running count kept for `decision` on these `shapes` here (tally), 0 where none is, or a damaged or
        planted value is, or autotune is off."""
        stored = self.entry(decision, shapes) or {}
        value = stored.get("count", 0)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    def tally(self, decision: str, shapes: Any, add: int, restart: bool = False) -> int:
        """Add `add` to the running count kept for `decision` on these `shapes` here (or start it again from `add`),
        and return the new count. A count, not a timing: kept on a busy machine too; nothing when autotune is off."""
        if not enabled():
            return 0
        total = (0 if restart else self.count(decision, shapes)) + max(0, int(add))
        self._write(self._key(decision, shapes), {"count": total})
        return total

    def seconds(self, candidates: Mapping[str, Callable[[], object]]) -> dict[str, float]:
        """Min seconds of one call per candidate, interleaved (the measurement `choose` makes), nothing kept."""
        return self._time(candidates)

    @staticmethod
    def _key(decision: str, shapes: Any) -> str:
        return json.dumps([decision, cpu_name(), torch.__version__, torch.get_num_threads(), shapes])

    def _time(self, candidates: Mapping[str, Callable[[], object]]) -> dict[str, float]:
        """Min seconds per candidate over interleaved repetitions (a warm-up call each first)."""
        for name, work in candidates.items():
            self.measure(name, work)
        best = dict.fromkeys(candidates, float("inf"))
        for _ in range(self.repeats):
            for name, work in candidates.items():
                best[name] = min(best[name], self.measure(name, work))
        return best

    def _file(self) -> Path:
        return self.path if self.path is not None else default_cache_path()

    def _read(self) -> dict[str, Any]:
        """The cached choices; {} when the file is missing, unreadable, corrupt or from another layout."""
        try:
            data = json.loads(self._file().read_text())
        except (OSError, ValueError, RecursionError):  # a damaged or planted cache: none
            return {}
        if not isinstance(data, dict) or data.get("version") != _VERSION or not isinstance(data.get("choices"), dict):
            return {}
        return data["choices"]

    def _write(self, key: str, entry: dict[str, Any]) -> None:
        """Add one choice to the file (temporary file + rename); an unwritable place means no cache, no error."""
        path = self._file()
        choices = {**self._read(), key: entry}
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the user cache folder: 0700, as runs/cache.py
            fd, tmp = tempfile.mkstemp(prefix=".autotune.", suffix=".json", dir=path.parent)
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump({"version": _VERSION, "choices": choices}, f, indent=1)
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        except OSError:
            pass


def pick(seconds: Mapping[str, float], default: str, margin: float = MARGIN) -> str:
    """The fastest candidate if it beats the default by more than `margin` (a ratio), else the default."""
    fastest = min(seconds, key=seconds.__getitem__)
    return fastest if seconds[default] > margin * seconds[fastest] else default


TUNER = Tuner()  # the process's tuner (tests replace it)


def recorded(decision: str, shapes: Any) -> str | None:
    """TUNER.recorded: see Tuner.recorded."""
    return TUNER.recorded(decision, shapes)


def entry(decision: str, shapes: Any) -> dict[str, Any] | None:
    """TUNER.entry: see Tuner.entry."""
    return TUNER.entry(decision, shapes)


def record(decision: str, shapes: Any, entry: dict[str, Any]) -> bool:
    """TUNER.record: see Tuner.record."""
    return TUNER.record(decision, shapes, entry)


def count(decision: str, shapes: Any) -> int:
    """TUNER.count: see Tuner.count."""
    return TUNER.count(decision, shapes)


def tally(decision: str, shapes: Any, add: int, restart: bool = False) -> int:
    """TUNER.tally: see Tuner.tally."""
    return TUNER.tally(decision, shapes, add, restart)


def choose(decision: str, shapes: Any, candidates: Mapping[str, Callable[[], object]], default: str) -> str:
    """TUNER.choose: see Tuner.choose."""
    return TUNER.choose(decision, shapes, candidates, default)


# -- the decisions -----------------------------------------------------------------------------------------

LAYOUT_ROWS = (1, 8, 32)  # rows of the decoding steps timed for the layout: batch 1, a beam or small batch, a batch


def shape_counts(weights: list[torch.Tensor]) -> list[list[int]]:
    """[[out, in, how many], ...] of 2-D weights, sorted: the shapes part of a key, and the work to time."""
    counts: dict[tuple[int, int], int] = {}
    for w in weights:
        counts[tuple(w.shape)] = counts.get(tuple(w.shape), 0) + 1
    return [[o, i, n] for (o, i), n in sorted(counts.items())]


def linear_layout(weights: list[torch.Tensor], rows: tuple[int, ...] = LAYOUT_ROWS) -> str:
    """"column-major" or "row-major" for these (out, in) Linear weights on this CPU: one decoding step's
    GEMMs (each shape as many times as the model has it) timed at each of `rows`, with either layout."""
    shapes = shape_counts(weights)
    firsts = {tuple(w.shape): w.detach() for w in reversed(weights)}  # one real weight per shape
    made: dict[str, list[tuple[torch.Tensor, int]]] = {}

    def layout(name: str) -> list[tuple[torch.Tensor, int]]:  # made on the warm-up call, only if measured
        if name not in made:
            made[name] = [((w.contiguous() if name == "row-major" else w.t().contiguous().t()), n)
                          for w, n in ((firsts[(o, i)], n) for o, i, n in shapes)]
        return made[name]

    inputs = {(r, i): torch.randn(r, i) for r in rows for _, i, _ in shapes}

    def step(name: str) -> Callable[[], object]:
        def work() -> None:
            with torch.no_grad():
                for r in rows:
                    for w, n in layout(name):
                        for _ in range(n):
                            torch.nn.functional.linear(inputs[(r, w.size(1))], w)
        return work

    return choose("linear-layout", {"shapes": shapes, "rows": list(rows)},
                  {"row-major": step("row-major"), "column-major": step("column-major")}, "row-major")


def training_dtype(d_model: int, d_ff: int, device: torch.device, rows: int = 2048) -> str:
    """"bf16" or "fp32" for `--dtype auto`: the position-wise FFN's forward and backward (the bulk of a training
    step's FLOPs) at `rows` tokens, timed in fp32 and under bf16 autocast. On CUDA with bf16 support: bf16
    without timing. bf16 ran 1.79x faster on an AMD EPYC with AVX512-BF16 and is slower where the CPU lacks it."""
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    if device.type != "cpu":
        return "fp32"
    g = torch.Generator().manual_seed(0)
    w1 = (torch.randn(d_ff, d_model, generator=g) / d_model**0.5).requires_grad_()
    w2 = (torch.randn(d_model, d_ff, generator=g) / d_ff**0.5).requires_grad_()
    x = torch.randn(rows, d_model, generator=g)

    def step(dtype: torch.dtype | None) -> Callable[[], object]:
        def work() -> None:
            with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
                y = torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(x, w1)), w2)
            y.float().sum().backward()
            w1.grad = w2.grad = None
        return work

    return choose("train-dtype", [d_model, d_ff, rows], {"fp32": step(None), "bf16": step(torch.bfloat16)}, "fp32")


def decoding_dtype(d_model: int, d_ff: int, vocab: int,
                   packed_gemm: Callable[[torch.Tensor], Callable[[torch.Tensor], torch.Tensor]] | None = None) -> str:
    """"bf16" or "fp32" for decoding's `dtype: auto`: one decoding step's GEMMs (the stacked q/k/v, the other
    attention projections, the FFN and the output layer) at each of `rows`, with fp32 weights and with bf16 ones,
    through the GEMMs the step will run. packed_gemm (where the captured step runs: a compiler, a covered model):
    weight -> its GEMM for bf16 (packing.packed_gemm: oneDNN's packed GEMM, which inductor's weight prepack gives a
    bf16 package; ATen's plain bf16 GEMM is 1.5-2x slower at one row on a Xeon with AMX, and was the wrong witness:
    it chose fp32 with 2 threads while the captured bf16 step ran 1.4-2.1x the fp32 one); fp32 through plain GEMMs
    either way. The rows timed: a batch's for the packed witness (PACKED_ROWS), 1 and 32 for the plain one
    (PLAIN_ROWS). Without AVX512-BF16 or AMX: fp32 without timing (bf16 is emulated there, and slower)."""
    if not has_bf16():
        return "fp32"
    rows = PACKED_ROWS if packed_gemm is not None else PLAIN_ROWS
    g = torch.Generator().manual_seed(0)
    shapes = [(3 * d_model, d_model), (d_model, d_model), (d_model, d_model), (d_ff, d_model), (d_model, d_ff),
              (vocab, d_model)]
    weights = [torch.randn(o, i, generator=g) / i**0.5 for o, i in shapes]
    inputs = {(r, i): torch.randn(r, i, generator=g) for r in rows for _, i in shapes}

    def step(dtype: torch.dtype) -> Callable[[], object]:
        ws = [w.to(dtype) for w in weights]
        xs = {k: x.to(dtype) for k, x in inputs.items()}
        gemms = [((packed_gemm(w) if dtype == torch.bfloat16 and packed_gemm is not None
                   else functools.partial(torch.nn.functional.linear, weight=w)), w.size(1)) for w in ws]

        def work() -> None:
            with torch.inference_mode():
                for r in rows:
                    for gemm, i in gemms:
                        gemm(xs[(r, i)])
        return work

    shapes_key: list[Any] = [d_model, d_ff, vocab, list(rows)] + (["packed"] if packed_gemm is not None else [])
    return choose("decode-dtype", shapes_key, {"fp32": step(torch.float32), "bf16": step(torch.bfloat16)}, "fp32")

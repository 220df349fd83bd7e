"""The registries of export formats and decoding engines, and the checks every export shares: an existing
output folder needs --overwrite, a missing optional package is one line naming `pip install ...`.

A format module registers itself here by name (FORMATS: export functions; ENGINES: modules whose `Backend` class
searches, with `SUPPORTS`, for engines/translator.py's Translator); the CLI (`scratchformer export`, the `--engine`
of translate, evaluate, serve and report) knows only these two tables.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from scratchformer.config.decoding import DecodingOptions
from scratchformer.decoding.pipeline import Backend
from scratchformer.errors import ConfigError
from scratchformer.runs import Run, load_run

# name -> (module under scratchformer.engines, the pip package it needs, or None)
FORMATS: dict[str, tuple[str, str | None]] = {
    "ctranslate2": ("ctranslate2", "ctranslate2"),
    "hf": ("hf", None),  # written with safetensors and tokenizers; loading it needs transformers
    "onnx": ("onnx", "onnxruntime onnx onnxscript"),
}
ENGINES: dict[str, tuple[str, str | None]] = {
    "torch": ("torch_engine", None),
    "ctranslate2": ("ctranslate2", "ctranslate2"),
    "onnxruntime": ("onnx", "onnxruntime onnx onnxscript"),
}


def require(package: str | None, what: str) -> None:
    """A one-line ConfigError naming `pip install ...` when an optional package is missing."""
    for name in (package or "").split():
        module = {"onnxscript": "onnxscript", "onnxruntime": "onnxruntime"}.get(name, name)
        try:
            importlib.import_module(module)
        except ImportError:
            raise ConfigError(f"{what} needs the optional package {name!r}: pip install {package}") from None


def _module(table: dict[str, tuple[str, str | None]], name: str, what: str) -> Any:
    if name not in table:
        raise ConfigError(f"unknown {what} {name!r}; choose one of {', '.join(table)}")
    module, package = table[name]
    require(package, f"{what} {name}")
    return importlib.import_module(f"scratchformer.engines.{module}")


def prepare_out(out: Path, overwrite: bool) -> Path:
    """An empty folder at `out`: one that holds files needs --overwrite (then its contents are replaced)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file: give a folder for the exported model")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise ConfigError(f"--out {out} already holds files: add --overwrite to replace them, or choose another "
                              "--out")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def export_run(run_dir: str | Path, fmt: str, out: str | Path, overwrite: bool = False,
               quantization: str | None = None, **options: Any) -> Path:
    """Export the run in `run_dir` to `out` in format `fmt`; returns `out`."""
    module = _module(FORMATS, fmt, "export format")
    run = load_run(run_dir)
    warn_members(run, f"the {fmt} export holds")
    module.check_expressible(run)  # before anything is written: a one-line error naming the field
    allowed = getattr(module, "QUANTIZATIONS", (None, "float32"))
    if quantization is not None and quantization not in allowed:  # None: the format's default (float32)
        raise ConfigError(f"--quantization {quantization}: format {fmt} writes "
                          f"{' or '.join(q for q in allowed if q)} weights")
    out = prepare_out(Path(out), overwrite)
    module.export(run, out, quantization=quantization, **options)
    return out


def make_backend(run: Run, options: DecodingOptions, **settings: Any) -> Backend:
    """The search of `options.engine` for `run` (exported into the run directory on first use, cached); `settings`
    are the engine's own (threads, patience, folder). engines/translator.py's Translator is the door that uses it."""
    module = _module(ENGINES, options.engine, "engine")
    if options.engine != "torch":
        warn_members(run, f"the {options.engine} engine decodes")
    return module.Backend(run, options, **settings)


def warn_members(run: Run, who: str) -> None:
    """One warning when a run's decoding.json names ensemble members that only our own decoder averages in."""
    if run.members:
        warnings.warn(f"{run.path}: decoding.json's ensemble of {len(run.members) + 1} models: {who} "
                      "model.safetensors alone (only --engine torch decodes the ensemble)", stacklevel=3)



# -- the export an engine keeps in the run directory ------------------------------------------------------------

def weights_digest(model: torch.nn.Module) -> str:
    """sha256 of the weights in memory (names, shapes, dtypes, values): it changes whenever a weight does, whichever
    file (model.safetensors, or --weights averaged.safetensors) they came from."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype};".encode())
        h.update(t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def read_stamp(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def cached_export(run: Run, name: str, stamp: dict[str, Any], write: Callable[[Path], None], stamp_file: str,
                  complete: Callable[[Path], bool] = lambda folder: True) -> Path:
    """RUN_DIR/export/<name>/, made by `write(folder)` (which also writes `stamp` into `stamp_file`) unless the
    stamp there already equals `stamp`. Written beside it and renamed: never half a cache; another process that
    got there first is fine. A run directory whose export/ cannot be made gets the export in the temporary folder,
    named by the stamp; one that refuses the files is one ConfigError line."""
    folder = Path(run.path) / "export" / name
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        digest = hashlib.sha256(json.dumps(stamp, sort_keys=True).encode()).hexdigest()[:16]
        folder = Path(tempfile.gettempdir()) / f"scratchformer-{name}-{digest}"
    if read_stamp(folder / stamp_file) == stamp and complete(folder):
        return folder
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=folder.parent))  # beside it: the rename is atomic
    try:
        write(tmp)
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    except PermissionError as e:
        raise ConfigError(f"the {name} engine exports into {folder} on first use and cannot write there "
                          f"({e.strerror}): copy the run directory somewhere writable") from None
    except OSError:
        if read_stamp(folder / stamp_file) != stamp:  # not another process that got there first
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
